set -u
T0=$(date +%s); nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
lscpu | grep -E 'Model name|L2|L3|Hypervisor' | head -5
cd .gpu && tar xJf all.tar.xz && rm all.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
for r in 1 2 3; do (cd memory && taskset -c 3 ../.gpu/memory.test -test.run TestPairWindows -pair-windows 200 | grep " min " | sed "s/^/windows r$r /"); done
pair_process "as placed 1"
pair_process "pinned 3" taskset -c 3
pair_process "pinned 7" taskset -c 7
echo "pairs done at $(( $(date +%s)-T0 ))s"
SUITES="memory" OUT=$OUT timeout 200 bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"
cat $OUT/summary.txt; (cd /tmp/strata-hybrid-logs && tar cJf $OUT/logs.tar.xz *.log)
grep -h -E -- '--- FAIL|panic:' /tmp/strata-hybrid-logs/*.log | head -20
echo total $(( $(date +%s)-T0 ))s
