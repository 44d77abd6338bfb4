T0=$(date +%s); cd .gpu && tar xJf b4.tar.xz && rm b4.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_KERNELS STRATA_PLAN_STEPS
SUITES="memory tensor autograd nn amp checkpoint examples/train-gpt" OUT=$OUT timeout 330 bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"
grep -E "^== test|test .*: exit|FAIL|panic" $OUT/summary.txt | head -30
run() { # name env flags...
  local n=$1 e=$2; shift 2
  s=$(date +%s); env $e timeout 120 .gpu/train-gpt -device cuda -bench "$@" > /tmp/bench-$n.jsonl 2> /tmp/bench-$n.log; echo "[$n] $e rc $? $(( $(date +%s)-s ))s"
  python3 -c "
import json
r=json.loads(open('/tmp/bench-$n.jsonl').read().strip().splitlines()[-1])
print(' '.join('%s=%s'%(k,r.get(k)) for k in ['tok_s','step_ms','peak_bytes','peak_reserved_bytes','pages_mapped_per_step','syncs_per_step']), 'ratio=%.4f'%(r['peak_reserved_bytes']/r['peak_bytes']))
" 2>&1 | tail -1
  cat /tmp/bench-$n.jsonl >> $OUT/bench.jsonl
}
A="-config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
run gpt2-fp16-ckpt-default X=1 $A
run gpt2-fp16-ckpt-plan0 STRATA_PLAN_STEPS=0 $A
tr=; for f in bench/traces/*.csv bench/traces/heldout/*.csv; do tr="$tr -trace $f"; done
s=$(date +%s); timeout 120 .gpu/bench-alloc -device cuda -no-bench -segments expandable -reps 1 $tr > /tmp/rep.jsonl 2>/dev/null; echo "device replays rc $? $(( $(date +%s)-s ))s"; cp /tmp/rep.jsonl $OUT/replays.jsonl; python3 -c "
import json
for l in open('/tmp/rep.jsonl'):
    r=json.loads(l)
    if r.get('bench')!='bench-alloc-trace': continue
    e=r['expandable']; print('%-34s torch %.4f ours %.4f ns/call %.0f' % (r['file'], r['torch_reserved_over_requested'], e['reserved_over_requested'], e['ns_per_call']))
"
s=$(date +%s); timeout 120 .gpu/train-gpt > /tmp/main.log 2>&1; echo "main job rc $? $(( $(date +%s)-s ))s"; grep -E "^step  6000|held-out accuracy:" /tmp/main.log | tail -2 | cut -c1-200
timeout 60 .gpu/generate -weights gpt.safetensors -addition 2000 2>&1 | grep "held-out accuracy:"
for e in X=1 STRATA_PLAN_STEPS=0; do s=$(date +%s); env $e timeout 90 .gpu/bench-alloc -reps 5 > /tmp/pair.jsonl 2> /tmp/pair.md; echo "bench-alloc $e rc $? $(( $(date +%s)-s ))s: $(grep -E '^\| (manager|pool|pool expandable) \| (4KiB|1MiB|64MiB|mixed) ' /tmp/pair.md | awk -F'|' '{printf "%s %s %s;",$2,$3,$4}')"; (echo "## $e"; cat /tmp/pair.md) >> $OUT/pair.md; done
echo total $(( $(date +%s)-T0 ))s
