T0=$(date +%s); cd .gpu && tar xJf b2.tar.xz && rm b2.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
if nvidia-smi -L | grep -q H200; then pair_process "h200 1"; pair_process "h200 2"; pair_process "h200 3"; pair_process "h200 pinned" taskset -c 3; fi
cp .gpu/train-gpt .gpu/train-gpt-base
A="-config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
C="-config char -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
F="-config gpt2 -precision fp32 -attention plain -cuda-graph off -bench-warmup 60 -steps 30"
B="-config gpt2 -precision bf16 -bench-warmup 60 -steps 30"
for v in base new base new; do
  cp .gpu/train-gpt-$v .gpu/train-gpt
  live_bench gpt2-fp16-ckpt-$v X=1 $A
  live_bench char-fp16-ckpt-$v X=1 $C
done
for v in base new; do
  cp .gpu/train-gpt-$v .gpu/train-gpt
  live_bench gpt2-fp32-$v X=1 $F
done
echo "t $(( $(date +%s)-T0 ))s"
s=$(date +%s); timeout 60 .gpu/train-gpt-new -device cuda -config gpt2 -memory-step 3 -memory-plot $OUT/gpt2-step3.png > /tmp/mt.log 2>&1; echo "memory plot rc $? $(( $(date +%s)-s ))s"; tail -3 /tmp/mt.log
replay_traces
echo "t $(( $(date +%s)-T0 ))s"
if [ $(( $(date +%s)-T0 )) -lt 60 ]; then (cd memory && STRATA_REQUIRE_GPU=1 timeout 100 ../.gpu/memory.test -test.timeout 95s > /tmp/mem.log 2>&1; echo "memory tests rc $?"; grep -E -- '--- FAIL' /tmp/mem.log | head; tail -2 /tmp/mem.log); fi
cd $OUT && tar cJf results.tar.xz $(ls | grep -v -E '^results|png$') && ls | grep -v -E '^results|png$' | xargs rm -f; ls -la $OUT
echo total $(( $(date +%s)-T0 ))s
