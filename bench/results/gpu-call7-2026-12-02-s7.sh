#!/usr/bin/env bash
# ad-hoc call 7 (2026-12-02 session 7): the review's kernel deduplication on the GPU
L=/tmp/strata-call7-logs
default_phases="all"
phases="all"
. "$(dirname "$0")/gpu-common.sh"
run_gpu_tests tensor autograd
timeout 60 .gpu/bench-attention -device cuda -precision bf16 -iters 20 > "$OUT/bench-attention.jsonl" 2> "$L/bench-attention.md"
say "bench-attention: exit $?"; grep -E "fused" "$L/bench-attention.md" | head -2 | tee -a "$OUT/summary.txt"
timeout 100 .gpu/train-gpt -config gpt2 -device cuda -bench -precision bf16 >> "$res" 2> "$L/row.txt"
say "train-gpt gpt2 bf16: exit $?; $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*')"
say done
