T0=$(date +%s); nvidia-smi -L
cd .gpu && tar xJf b2.tar.xz && rm b2.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
SUITES="cuda tensor autograd nn amp checkpoint dist nccl" OUT=$OUT timeout 500 bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"
cat $OUT/summary.txt
grep -h -E -- '--- FAIL' /tmp/strata-hybrid-logs/*.log | head -20
for f in /tmp/strata-hybrid-logs/test-*.log; do grep -E -- '--- (PASS|FAIL)' $f | grep -E 'Gemm|StreamPriority|ZeroGraph|FunctionName|Abort|Destroy|Embedding|Half|Region|Contiguous|Broadcast|Overlap|Zero' | head -8; done
cd /tmp/strata-hybrid-logs && tar cJf $OUT/logs.tar.xz *.log; ls -la $OUT
echo total $(( $(date +%s)-T0 ))s
