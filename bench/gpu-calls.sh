# Helpers for a device call's script (sourced, not run): the live bench,
# the trace replays and the allocation pairs that sessions 37-39 copied
# into each call script (bench/results/gpu-s3*/callN.sh). The binaries are
# in .gpu (built here: GPU.md); results go to $OUT. DEVICE (default cuda)
# is the device they run on.
#
#   . bench/gpu-calls.sh
#   live_bench gpt2-fp16-ckpt X=1 -config gpt2 -precision fp16 -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30
#   live_bench gpt2-fp16-ckpt-plan0 STRATA_PLAN_STEPS=0 -config gpt2 ...
#   replay_traces
#   pair_process "default 1" [taskset -c 3]
DEVICE=${DEVICE:-cuda}
OUT=${OUT:-/tmp/strata-gpu}

# live_bench NAME ENV FLAGS...: train-gpt -bench with FLAGS under ENV
# (X=1 for none); prints its speed, peaks and peak reserved / allocated,
# and appends its JSON line to $OUT/bench.jsonl.
live_bench() {
  local n=$1 e=$2 s; shift 2
  s=$(date +%s)
  env "$e" timeout 120 .gpu/train-gpt -device "$DEVICE" -bench "$@" > "/tmp/bench-$n.jsonl" 2> "/tmp/bench-$n.log"
  echo "[$n] $e rc $? $(( $(date +%s)-s ))s"
  python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(' '.join('%s=%s' % (k, r.get(k)) for k in ['tok_s', 'step_ms', 'peak_bytes', 'peak_reserved_bytes', 'pages_mapped_per_step', 'syncs_per_step']),
      'ratio=%.4f' % (r['peak_reserved_bytes'] / r['peak_bytes']))
" "/tmp/bench-$n.jsonl" 2>&1 | tail -1
  cat "/tmp/bench-$n.jsonl" >> "$OUT/bench.jsonl"
}

# replay_traces [FLAGS...]: the 24 PyTorch traces of bench/traces replayed
# through expandable segments with step plans on $DEVICE; prints each
# one's reserved / requested beside PyTorch's and the time a call, and
# keeps the JSON in $OUT/replays.jsonl.
replay_traces() {
  local s tr=()
  for f in bench/traces/*.csv bench/traces/heldout/*.csv; do tr+=(-trace "$f"); done
  s=$(date +%s)
  timeout 120 .gpu/bench-alloc -device "$DEVICE" -no-bench -segments expandable -reps 1 "${tr[@]}" "$@" > /tmp/rep.jsonl 2>/dev/null
  echo "device replays rc $? $(( $(date +%s)-s ))s"
  cp /tmp/rep.jsonl "$OUT/replays.jsonl"
  python3 -c "
import json
for l in open('/tmp/rep.jsonl'):
    r = json.loads(l)
    if r.get('bench') != 'bench-alloc-trace':
        continue
    e = r['expandable']
    print('%-34s torch %.4f ours %.4f ns/call %.0f' % (r['file'], r['torch_reserved_over_requested'], e['reserved_over_requested'], e['ns_per_call']))
"
}

# pair_process LABEL [PREFIX...]: one bench-alloc process of the pairs
# (-reps 9), run under PREFIX (taskset -c 3, say); prints the mixed rows,
# the fixed sizes and the goal table, and appends to $OUT/pair.md and
# $OUT/pair.jsonl.
pair_process() {
  local label=$1 s; shift
  s=$(date +%s)
  "$@" timeout 110 .gpu/bench-alloc -device "$DEVICE" -reps 9 > /tmp/pair.jsonl 2> /tmp/pair.md
  echo "pair $label rc $? $(( $(date +%s)-s ))s"
  grep -E '^\| (pool|pool expandable|manager|cuMemAllocAsync) \| mixed' /tmp/pair.md
  grep -E '^\| (pool|manager) \| (4KiB|1MiB|64MiB)' /tmp/pair.md | awk -F'|' '{printf "%s %s %s;",$2,$3,$4}'; echo
  grep -E '^\| (4KiB|1MiB|64MiB|mixed) ' /tmp/pair.md
  (echo "## $label"; cat /tmp/pair.md) >> "$OUT/pair.md"
  cat /tmp/pair.jsonl >> "$OUT/pair.jsonl"
}
