T0=$(date +%s); cd .gpu && tar xJf b5.tar.xz && rm b5.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_PLAN_STEPS STRATA_KERNELS
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for r in 1 2 3 pinned; do s=$(date +%s); p=; [ $r = pinned ] && p="taskset -c 3"; $p timeout 100 .gpu/bench-alloc -reps 9 > /tmp/pair.jsonl 2> /tmp/pair.md; echo "pair process $r rc $? $(( $(date +%s)-s ))s"; grep -E '^\| (pool|pool expandable|manager|cuMemAllocAsync) \| mixed' /tmp/pair.md; grep -E '^\| (pool|manager) \| (4KiB|1MiB|64MiB)' /tmp/pair.md | awk -F'|' '{printf "%s %s %s;",$2,$3,$4}'; echo; grep -E '^\| (4KiB|1MiB|64MiB|mixed) ' /tmp/pair.md; (echo "## process $r"; cat /tmp/pair.md) >> $OUT/pair.md; cat /tmp/pair.jsonl >> $OUT/pair.jsonl; done
echo total $(( $(date +%s)-T0 ))s
