#!/usr/bin/env bash
# ad-hoc call 3 (2026-12-02 session 7): tests of everything new, A/B of attention kernels and cuBLASLt epilogues
L=/tmp/strata-call3-logs
default_phases="all"
phases="all"
. "$(dirname "$0")/gpu-common.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
run_gpu_tests cuda tensor autograd nn checkpoint amp memory
grep -h "asynchronous copies of pageable" "$L"/test-cuda.log | head -2 | tee -a "$OUT/summary.txt"
(cd tensor && STRATA_EXPANDABLE_SEGMENTS=1 STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/tensor.test -test.run 'CUDA|GPU' -test.timeout 190s > "$L/tensor-expandable.log" 2>&1); say "tensor with expandable segments: exit $?; $(grep -c -- '--- FAIL' "$L/tensor-expandable.log") failed"
grep -E -- '--- FAIL|panic:|INVALID' "$L/tensor-expandable.log" | head -8 | tee -a "$OUT/summary.txt"
for k in mma3 mma2; do
  STRATA_ATTENTION=$k timeout 100 .gpu/bench-attention -device cuda -precision bf16 -iters 20 > "$OUT/bench-attention-$k.jsonl" 2> "$L/bench-attention-$k.md"
  say "bench-attention $k: exit $?"; grep -E "fused" "$L/bench-attention-$k.md" | head -3 | tee -a "$OUT/summary.txt"
done
row() { # env... -- train-gpt args
  local envs=() ; while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 150 .gpu/train-gpt -device cuda -bench "$@" >> "$res" 2> "$L/row-$(echo "$*" | tr ' /' '__').txt"
  say "train-gpt ${envs[*]} $*: exit $?; $(tail -1 "$res" | grep -o '"attention":"[a-z]*"') $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*') $(tail -1 "$res" | grep -o '"mfu":[0-9.]*')"
}
row X=1 -- -config gpt2 -precision bf16
row STRATA_ATTENTION=mma2 -- -config gpt2 -precision bf16
row STRATA_CUBLASLT=off -- -config gpt2 -precision bf16
row X=1 -- -config gpt2 -precision fp16
row X=1 -- -config gpt2 -precision fp32
row X=1 -- -config gpt2 -precision fp32 -attention fused
row X=1 -- -config gpt2 -precision tf32
row X=1 -- -config gpt2 -precision tf32 -attention fused
row X=1 -- -config char -precision fp16
row STRATA_EXPANDABLE_SEGMENTS=1 -- -config gpt2 -precision bf16
timeout 100 .gpu/train-gpt -device cuda -precision bf16 > "$L/default-bf16.log" 2>&1
say "default run bf16 (auto attention): exit $?; $(grep -E 'held-out accuracy' "$L/default-bf16.log" | tail -1)"
if [ -n "$NCU" ]; then
  timeout 200 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    .gpu/train-gpt -config gpt2 -device cuda -bench -steps 1 -bench-warmup 1 -precision bf16 > "$L/ncu.csv" 2> "$L/ncu.err"
  say "ncu: exit $?"
  python3 bench/ncu_table.py --last-step gather "$L/ncu.csv" > "$OUT/ncu-strata-gpt2-bf16.md" 2>> "$OUT/summary.txt"
  head -32 "$OUT/ncu-strata-gpt2-bf16.md" | tee -a "$OUT/summary.txt"
fi
say done
