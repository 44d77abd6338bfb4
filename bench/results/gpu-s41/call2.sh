T0=$(date +%s); cd .gpu && tar xJf b2.tar.xz && rm b2.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_KERNELS STRATA_PLAN_STEPS
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
( nvcc -std=c++17 -O3 -fatbin -gencode arch=compute_90,code=sm_90 -gencode 'arch=compute_80,code=[sm_80,compute_80]' -o $OUT/kernels.fatbin kernels/all.cu > /tmp/nvcc.log 2>&1; echo "nvcc rc $? $(( $(date +%s)-T0 ))s" > /tmp/nvcc.done ) &
. bench/gpu-calls.sh
A="-config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
live_bench gpt2-fp16-ckpt X=1 $A
live_bench char-fp16-ckpt X=1 -config char -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30
live_bench gpt2-fp32 X=1 -config gpt2 -precision fp32 -attention plain -cuda-graph off -bench-warmup 60 -steps 30
live_bench gpt2-bf16 X=1 -config gpt2 -precision bf16 -bench-warmup 60 -steps 30
echo "t $(( $(date +%s)-T0 ))s"
replay_traces
echo "t $(( $(date +%s)-T0 ))s"
(cd examples/train-gpt && STRATA_REQUIRE_GPU=1 timeout 150 ../../.gpu/train-gpt.test -test.v -test.timeout 140s > /tmp/tg.log 2>&1; echo "train-gpt tests rc $? $(grep -c '^=== RUN' /tmp/tg.log) run $(grep -c -- '--- FAIL' /tmp/tg.log) failed $(grep -c -- '--- SKIP' /tmp/tg.log) skipped"); grep -- '--- FAIL' /tmp/tg.log | head
echo "t $(( $(date +%s)-T0 ))s"
while [ ! -f /tmp/nvcc.done ] && [ $(( $(date +%s)-T0 )) -lt 400 ]; do sleep 2; done
cat /tmp/nvcc.done; tail -3 /tmp/nvcc.log; sha256sum $OUT/kernels.fatbin
(cd tensor && STRATA_KERNELS=$OUT/kernels.fatbin STRATA_REQUIRE_GPU=1 timeout 150 ../.gpu/tensor.test -test.v -test.timeout 140s > /tmp/tt.log 2>&1; echo "tensor tests rc $? $(grep -c '^=== RUN' /tmp/tt.log) run $(grep -c -- '--- FAIL' /tmp/tt.log) failed $(grep -c -- '--- SKIP' /tmp/tt.log) skipped")
grep -E -- '--- FAIL|--- (PASS|FAIL|SKIP): TestLayerNormConstantRowsFloat64OnDevices' /tmp/tt.log | head; grep -E -- '--- (PASS|FAIL|SKIP): TestLayerNormConstantRowsFloat64OnDevices/cuda' /tmp/tt.log
tail -c 3000 /tmp/tg.log > $OUT/tg-tail.log
echo total $(( $(date +%s)-T0 ))s
