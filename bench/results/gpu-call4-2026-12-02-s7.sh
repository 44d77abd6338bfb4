#!/usr/bin/env bash
# ad-hoc call 4 (2026-12-02 session 7): final rows with PyTorch in the same call, expandable segments, memstrategies
L=/tmp/strata-call4-logs
default_phases="all"
phases="all"
. "$(dirname "$0")/gpu-common.sh"
t0=$(date +%s)
run_gpu_tests cuda tensor autograd nn
(cd tensor && STRATA_EXPANDABLE_SEGMENTS=1 STRATA_REQUIRE_GPU=1 timeout 120 ../.gpu/tensor.test -test.run 'CUDA|GPU' -test.timeout 110s > "$L/tensor-expandable.log" 2>&1); say "tensor with expandable segments: exit $?; $(grep -c -- '--- FAIL' "$L/tensor-expandable.log") failed"
grep -E -- '--- FAIL|panic:|INVALID' "$L/tensor-expandable.log" | head -6 | tee -a "$OUT/summary.txt"
n=0
row() { # env... -- train-gpt args
  local envs=() ; while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  n=$((n+1))
  env "${envs[@]}" timeout 100 .gpu/train-gpt -device cuda -bench "$@" >> "$res" 2> "$L/row-$n.txt"
  local rc=$?
  if [ $rc -ne 0 ]; then say "train-gpt ${envs[*]} $*: exit $rc: $(tail -1 "$L/row-$n.txt")"; return; fi
  say "train-gpt ${envs[*]} $*: $(tail -1 "$res" | grep -o '"attention":"[a-z]*"') $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*') $(tail -1 "$res" | grep -o '"peak_reserved_bytes":[0-9]*') $(tail -1 "$res" | grep -o '"mfu":[0-9.]*')"
}
row X=1 -- -config gpt2 -precision bf16
row STRATA_EXPANDABLE_SEGMENTS=1 -- -config gpt2 -precision bf16
row X=1 -- -config gpt2 -precision fp16
row X=1 -- -config gpt2 -precision fp32
row X=1 -- -config gpt2 -precision tf32
row X=1 -- -config char -precision fp16
row X=1 -- -config gpt2 -precision fp16 -checkpoint blocks
row X=1 -- -config gpt2 -precision fp16 -checkpoint selective
timeout 60 .gpu/bench-attention -device cuda -precision bf16 -iters 20 > "$OUT/bench-attention.jsonl" 2> "$L/bench-attention.md"
say "bench-attention: exit $?"; grep -E "cuda" "$L/bench-attention.md" | head -3 | tee -a "$OUT/summary.txt"
say "strata done at $(( $(date +%s) - t0 ))s"
if [ -f .gpu/torch_gpt.py ]; then
  (cd .gpu && timeout 150 python3 ../bench/torch_rows.py gpt2:bf16:1:0 gpt2:bf16:0:0 gpt2:fp16:1:0 char:fp16:1:0 gpt2:fp16:0:1) >> "$res" 2> "$L/torch.txt"
  say "pytorch eager: exit $?"; grep -h '"tok' "$res" | tail -5 | cut -c1-300 | tee -a "$OUT/summary.txt"
fi
timeout 110 .gpu/memstrategies -config gpt2 -precision bf16 -attention fused -steps 5 -warmup 3 -strategies device,device-fused,hybrid \
  -png "$OUT/memstrategies-gpt2-bf16-fused.png" >> "$res" 2> "$L/memstrategies.log"
say "memstrategies gpt2 bf16 fused: exit $?"; grep -E '^\||raised|spilled' "$L/memstrategies.log" | tee -a "$OUT/summary.txt"
say "at $(( $(date +%s) - t0 ))s"
if [ -f .gpu/torch_gpt.py ] && [ $(( $(date +%s) - t0 )) -lt 380 ]; then
  cat > "$L/compile.py" <<'PY'
import json, sys, torch
sys.path.insert(0, ".gpu")
import torch_gpt as t
torch.backends.cuda.matmul.allow_tf32 = False
for name, mode in (("gpt2", "bf16"), ("char", "fp16")):
    try:
        t.run(name, mode, sdpa=True, ckpt=False, compile=True, warm=5, steps=10)
    except Exception as e:
        print("compile failed", name, mode, repr(e)[:200], flush=True)
PY
  timeout $(( 560 - ($(date +%s) - t0) )) python3 "$L/compile.py" >> "$res" 2> "$L/compile.txt"
  say "torch.compile: exit $?"; grep -h 'compile' "$res" | tail -2 | cut -c1-300 | tee -a "$OUT/summary.txt"
fi
say "done at $(( $(date +%s) - t0 ))s"
