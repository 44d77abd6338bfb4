#!/usr/bin/env bash
# CPU benchmark of issue 2: strata vs Debian's PyTorch 1.13 (OpenBLAS) on
# the tiny GPT shape, same machine, same session, alternating runs.
# Usage: bench/cpu-tiny.sh [runs]   (needs python3-torch, libopenblas0-pthread)
# Writes bench/results/cpu-tiny-<date>.json and prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
out=bench/results/cpu-tiny-$(date -u +%Y-%m-%d).json
go build -o /tmp/strata-train-gpt ./examples/train-gpt
anchor=${TORCH_ANCHOR:-../shared/anchors/torch_cpu.py}
{
  echo '{"date": "'"$(date -u +%FT%TZ)"'", "machine": "'"$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"'",'
  echo ' "command": "bench/cpu-tiny.sh '"$runs"'", "runs": ['
  for i in $(seq "$runs"); do
    s=$(/tmp/strata-train-gpt -config tiny -device cpu -bench -steps 20 2>/dev/null)
    o=$(STRATA_BLAS=go /tmp/strata-train-gpt -config tiny -device cpu -bench -steps 20 2>/dev/null)
    g=$(STRATA_BLAS=gonum /tmp/strata-train-gpt -config tiny -device cpu -bench -steps 5 2>/dev/null)
    p=$(/usr/bin/python3 "$anchor" 2 tiny | tail -1)
    sep=","; [ "$i" = "$runs" ] && sep=""
    echo "  {\"strata\": $s, \"strata_own_gemm\": $o, \"strata_gonum\": $g, \"pytorch\": $p}$sep"
  done
  echo ']}'
} > "$out"
python3 - "$out" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
s = [r["strata"]["tok_s"] for r in d["runs"]]
o = [r["strata_own_gemm"]["tok_s"] for r in d["runs"]]
g = [r["strata_gonum"]["tok_s"] for r in d["runs"]]
p = [r["pytorch"]["tok_s"] for r in d["runs"]]
print("| runtime | tokens/s (median of %d) | runs |" % len(s))
print("|---|---|---|")
print("| strata (OpenBLAS) | %.0f | %s |" % (statistics.median(s), ", ".join("%.0f" % x for x in s)))
print("| strata (own Go/asm GEMM, no library) | %.0f | %s |" % (statistics.median(o), ", ".join("%.0f" % x for x in o)))
print("| strata (gonum GEMM) | %.0f | %s |" % (statistics.median(g), ", ".join("%.0f" % x for x in g)))
print("| PyTorch 1.13 (OpenBLAS) | %.0f | %s |" % (statistics.median(p), ", ".join("%.0f" % x for x in p)))
print("ratio strata/PyTorch: %.2fx" % (statistics.median(s) / statistics.median(p)))
PY
