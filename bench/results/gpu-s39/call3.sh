T0=$(date +%s); cd .gpu && tar xJf b3.tar.xz && rm b3.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_PLAN_STEPS STRATA_KERNELS
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
# the CUDA manager's pairs (plans on by default) before (178200b) and after this session's planner changes, alternating on one host
for r in 1 2; do for v in bench-alloc-old bench-alloc; do s=$(date +%s); timeout 90 .gpu/$v -reps 5 > /tmp/pair.jsonl 2> /tmp/pair.md; echo "$v run $r rc $? $(( $(date +%s)-s ))s: $(grep -E '^\| (manager|pool|pool expandable) \| (4KiB|1MiB|64MiB|mixed) ' /tmp/pair.md | awk -F'|' '{printf "%s %s %s;",$2,$3,$4}')"; (echo "## $v run $r"; cat /tmp/pair.md) >> $OUT/pair.md; cat /tmp/pair.jsonl >> $OUT/pair.jsonl; done; done
s=$(date +%s); STRATA_PLAN_STEPS=0 timeout 90 .gpu/bench-alloc -reps 5 > /tmp/pair.jsonl 2> /tmp/pair.md; echo "bench-alloc STRATA_PLAN_STEPS=0 rc $? $(( $(date +%s)-s ))s: $(grep -E '^\| manager \| (4KiB|1MiB|64MiB|mixed) ' /tmp/pair.md | awk -F'|' '{printf "%s %s %s;",$2,$3,$4}')"; (echo "## STRATA_PLAN_STEPS=0"; cat /tmp/pair.md) >> $OUT/pair.md
(cd memory && timeout 60 ../.gpu/memory.test -test.run XXX -test.bench 'BenchmarkPoolPair' -test.benchtime 1s) > $OUT/poolbench.txt 2>&1; grep -E "^Benchmark" $OUT/poolbench.txt | awk '{print $1, $3, $4}'
SUITES="memory examples/train-gpt" OUT=$OUT timeout 200 bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"; grep -E "^== test|FAIL|panic" $OUT/summary.txt | head
for e in X=1 STRATA_PLAN_STEPS=0; do env $e timeout 60 .gpu/train-gpt -device cuda -bench -config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30 > /tmp/b.jsonl 2>/dev/null; echo "live gpt2 fp16 ckpt $e rc $?"; python3 -c "
import json
r=json.loads(open('/tmp/b.jsonl').read().strip().splitlines()[-1])
print(' '.join('%s=%s'%(k,r.get(k)) for k in ['tok_s','peak_bytes','peak_reserved_bytes','pages_mapped_per_step','syncs_per_step']), 'ratio=%.4f'%(r['peak_reserved_bytes']/r['peak_bytes']))"; cat /tmp/b.jsonl >> $OUT/bench.jsonl; done
echo total $(( $(date +%s)-T0 ))s
