T0=$(date +%s); nvidia-smi -L; echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
cd .gpu && tar xJf b1.tar.xz && rm b1.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
SUITES="cuda memory tensor autograd nn checkpoint dist" OUT=$OUT timeout 300 bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"
cat $OUT/summary.txt
grep -h -E -- '--- (PASS|FAIL|SKIP)' /tmp/strata-hybrid-logs/test-*.log | grep -E 'PipelineTraceOneGroup|Released|TouchOnce|ParameterOnly|ClaimsDeviceOnce|BLASLtUnusable|FAIL' | head -12
(cd /tmp/strata-hybrid-logs && tar cJf $OUT/logs.tar.xz *.log)
if nvidia-smi -L | grep -q H200; then
  lscpu | grep -E 'Model name|MHz|L2|L3' | head -5
  . bench/gpu-calls.sh
  pair_process "as placed 1"
  pair_process "pinned 3" taskset -c 3
  [ $(( $(date +%s)-T0 )) -lt 400 ] && pair_process "as placed 2"
fi
echo total $(( $(date +%s)-T0 ))s
