#!/bin/bash
# trace-summary.sh: replays every PyTorch allocation trace of bench/traces
# (the twelve of bench/traces and the twelve held-out ones) through an
# expandable pool with step plans, on the CPU's host backend (the device
# backend gives the same figures: bench/results/gpu-s38.md, gpu-s39.md),
# and prints each trace's peak reserved / requested beside PyTorch's, then
# a summary: how many are above 1.02, the mean and the max. It is the
# quick check of a placement change before the scale sweep
# (TestExpandableScaleSweep) and the live gate on the GPU.
#
#   bash bench/trace-summary.sh [bench-alloc flags, e.g. -plan-steps=false or -scale 0.5]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/bench-alloc
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./examples/bench-alloc
args=()
for f in bench/traces/*.csv bench/traces/heldout/*.csv; do args+=(-trace "$f"); done
"$bin" -device cpu -no-bench -segments expandable -reps 1 "${args[@]}" "$@" 2>/dev/null | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
rows = [r for r in rows if r.get("bench") == "bench-alloc-trace"]
print("| trace | PyTorch | ours | us a call |")
print("|---|---:|---:|---:|")
vals = []
for r in rows:
    e = r["expandable"]
    vals.append(e["reserved_over_requested"])
    print("| %s | %.4f | %.4f | %.1f |" % (r["file"], r["torch_reserved_over_requested"], vals[-1], e["ns_per_call"] / 1000))
if not vals:
    sys.exit("no trace replayed")
print(json.dumps({"bench": "trace-summary", "traces": len(vals), "above_1_02": sum(v > 1.02 for v in vals),
                  "mean": round(sum(vals) / len(vals), 4), "max": round(max(vals), 4)}))
'
