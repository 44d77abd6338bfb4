T0=$(date +%s); cd .gpu && tar xJf b3.tar.xz && rm b3.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
pair_process "1"; pair_process "2"; pair_process "3"; pair_process "pinned" taskset -c 3
echo "t $(( $(date +%s)-T0 ))s"
echo "t $(( $(date +%s)-T0 ))s"
(cd examples/train-gpt && STRATA_REQUIRE_GPU=1 timeout 150 ../../.gpu/train-gpt.test -test.timeout 140s -test.run 'TestGPUMemoryCapture|TestMemoryCapture' -test.v > /tmp/tg.log 2>&1; echo "train-gpt capture tests rc $?"; grep -E -- '--- (PASS|FAIL|SKIP)' /tmp/tg.log | head; tail -2 /tmp/tg.log)
cp /tmp/tg.log $OUT/
cd $OUT && tar cJf results.tar.xz $(ls | grep -v -E '^results|png$') && ls | grep -v -E '^results|png$' | xargs rm -f; ls -la $OUT
echo total $(( $(date +%s)-T0 ))s
