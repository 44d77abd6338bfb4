T0=$(date +%s); cd .gpu && tar xJf b3.tar.xz && rm b3.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_KERNELS STRATA_PLAN_STEPS
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for r in 1 2; do for e in 0 1; do s=$(date +%s); STRATA_PLAN_STEPS=$e timeout 110 .gpu/bench-alloc -reps 9 > /tmp/pair.jsonl 2> /tmp/pair.md; echo "pair STRATA_PLAN_STEPS=$e round $r rc $? $(( $(date +%s)-s ))s"; grep -E '^\| (pool|manager|cuMemAllocAsync) ' /tmp/pair.md | grep -E "mixed|manager"; (echo "## STRATA_PLAN_STEPS=$e round $r"; cat /tmp/pair.md) >> $OUT/pair.md; done; done
echo total $(( $(date +%s)-T0 ))s
