T0=$(date +%s); cd .gpu && tar xJf b1.tar.xz && rm b1.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_PLAN_STEPS STRATA_KERNELS
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
s=$(date +%s); timeout 300 python3 bench/torch_traces.py .gpu heldout /tmp/heldout > /tmp/traces.jsonl 2>/tmp/traces.err; echo "traces rc $? $(( $(date +%s)-s ))s"; cp /tmp/traces.jsonl $OUT/; tail -3 /tmp/traces.err
ls -la /tmp/heldout; (cd /tmp && tar czf $OUT/heldout.tgz heldout)
python3 -c "
import json
for l in open('/tmp/traces.jsonl'):
    r=json.loads(l); print(r.get('trace'), r.get('events'), 'peak_res %.0f peak_alloc %.0f'%(r.get('peak_reserved_mib',0),r.get('peak_alloc_mib',0)), r.get('error','')[:300])
"
(cd memory && STRATA_REQUIRE_GPU=1 timeout 90 ../.gpu/memory.test -test.v -test.run 'TestGPU|Plan|TestLowerBound' > /tmp/m.log 2>&1; echo "memory TestGPU*/Plan* rc $?: $(grep -c -- '--- PASS' /tmp/m.log) passed, $(grep -c -- '--- FAIL' /tmp/m.log) failed, $(grep -c -- '--- SKIP' /tmp/m.log) skipped"; grep -- '--- FAIL' /tmp/m.log | head)
tr=; for f in /tmp/heldout/*.csv bench/traces/*.csv; do tr="$tr -trace $f"; done
for ps in true false; do s=$(date +%s); timeout 120 .gpu/bench-alloc -device cuda -no-bench -segments expandable -plan-steps=$ps -reps 1 $tr > /tmp/rep-$ps.jsonl 2>/dev/null; echo "device replays plan-steps=$ps rc $? $(( $(date +%s)-s ))s"; cp /tmp/rep-$ps.jsonl $OUT/; python3 -c "
import json
for l in open('/tmp/rep-$ps.jsonl'):
    r=json.loads(l)
    if r.get('bench')!='bench-alloc-trace': continue
    e=r['expandable']; print('%-34s torch %.4f ours %.4f ns/call %.0f' % (r['file'], r['torch_reserved_over_requested'], e['reserved_over_requested'], e['ns_per_call']))
"; done
echo total $(( $(date +%s)-T0 ))s
