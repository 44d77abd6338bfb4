# Session 51's device call: the VMM tests after the mapPages refactor,
# and bench-alloc's pairs in three processes when the card is an H200
# (issue 12's figure is for the H200's host) or PAIR=1; after them, with
# SUITES set, those packages' GPU suites (bench/gpu-hybrid.sh suites24).
set -u
T0=$(date +%s); nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
lscpu | grep -E 'Model name|L2|L3|Hypervisor' | head -5
cd .gpu && tar xJf all.tar.xz && rm all.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
(cd memory && STRATA_REQUIRE_GPU=1 timeout 120 ../.gpu/memory.test -test.run 'GPUVirtual|GPUExpandable' -test.v > $OUT/vmm.log 2>&1; echo "vmm tests rc $?")
grep -E '^(--- |ok|FAIL|PASS)' $OUT/vmm.log | sort | uniq -c | sort -rn | head -20
if nvidia-smi -L | grep -q H200 || [ "${PAIR:-0}" = 1 ]; then
  . bench/gpu-calls.sh
  pair_process "as placed 1"
  pair_process "pinned 3" taskset -c 3
  pair_process "pinned 7" taskset -c 7
  echo "pairs done at $(( $(date +%s)-T0 ))s"
fi
if [ -n "${SUITES:-}" ]; then
  SUITES="$SUITES" OUT=$OUT timeout ${SUITES_S:-400} bash bench/gpu-hybrid.sh suites24
  echo "suites done at $(( $(date +%s)-T0 ))s"
fi
echo total $(( $(date +%s)-T0 ))s
