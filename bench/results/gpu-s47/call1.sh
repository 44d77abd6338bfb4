set -u
T0=$(date +%s); nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
lscpu | grep -E 'Model name|MHz|L2|L3|Hypervisor|NUMA' | head -8
cd .gpu && tar xJf pair.tar.xz && rm pair.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
if nvidia-smi -L | grep -q H200; then
  pair_process "as placed 1"
  pair_process "pinned 3" taskset -c 3
fi
for b in memory-old memory; do
  (cd memory && timeout 60 ../.gpu/$b.test -test.run TestGPUMigrateHostTiersRoundTrip -test.v -test.count=1 > $OUT/migrate-$b.log 2>&1; echo "migrate $b rc $?")
  grep -E '^\s*--- |Error:|Messages:|^ok|FAIL' $OUT/migrate-$b.log | head -30
done
(cd tensor && STRATA_EXPANDABLE_SEGMENTS=0 timeout 90 ../.gpu/tensor.test -test.run 'TestMoveTo|Offload|Spill|Ring' -test.count=1 > $OUT/tensor-classic-moves.log 2>&1; echo "tensor classic moves rc $?"; grep -cE '^\s*--- PASS' $OUT/tensor-classic-moves.log; grep -E '^\s*--- FAIL|^ok|^FAIL' $OUT/tensor-classic-moves.log | head)
echo "at $(( $(date +%s)-T0 ))s"
SUITES="memory" OUT=$OUT timeout 200 bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"
cat $OUT/summary.txt; (cd /tmp/strata-hybrid-logs && tar cJf $OUT/logs.tar.xz *.log)
echo total $(( $(date +%s)-T0 ))s
