#!/usr/bin/env bash
# ad-hoc call 1 (2026-12-02 session 7)
L=/tmp/strata-call1-logs
default_phases="all"
phases="all"
. "$(dirname "$0")/gpu-common.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
# VMM copies first (diagnosis)
(cd cuda && STRATA_REQUIRE_GPU=1 timeout 60 ../.gpu/cuda.test -test.run 'VMM' -test.v > "$L/vmm.log" 2>&1); say "vmm copies: exit $?"
grep -v "^=== RUN" "$L/vmm.log" | head -60 | tee -a "$OUT/summary.txt"
run_gpu_tests cuda memory tensor autograd
# the tensor suite with expandable segments on the device
(cd tensor && STRATA_EXPANDABLE_SEGMENTS=1 STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/tensor.test -test.run 'CUDA|GPU' -test.timeout 190s > "$L/tensor-expandable.log" 2>&1); say "tensor expandable: exit $?; $(grep -c -- '--- FAIL' "$L/tensor-expandable.log") failed"
grep -E -- '--- FAIL|panic:|Error:|INVALID' "$L/tensor-expandable.log" | head -12 | tee -a "$OUT/summary.txt"
for row in bf16:plain bf16:fused fp16:fused; do
  IFS=: read -r prec attn <<< "$row"
  timeout 120 .gpu/train-gpt -config gpt2 -device cuda -bench -steps 10 -precision $prec -attention $attn >> "$res" 2> "$L/bench-$prec-$attn.txt"
  say "train-gpt gpt2 $prec $attn: exit $?; $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*') $(tail -1 "$res" | grep -o '"mfu":[0-9.]*')"
done
STRATA_EXPANDABLE_SEGMENTS=1 timeout 120 .gpu/train-gpt -config gpt2 -device cuda -bench -steps 10 -precision bf16 -attention fused >> "$res" 2> "$L/bench-expandable.txt"
say "train-gpt gpt2 bf16 fused EXPANDABLE: exit $?; $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*')"; tail -3 "$L/bench-expandable.txt" | tee -a "$OUT/summary.txt"
if [ -n "$NCU" ]; then
  timeout 300 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    .gpu/train-gpt -config gpt2 -device cuda -bench -steps 1 -bench-warmup 1 -precision bf16 -attention fused > "$L/ncu.csv" 2> "$L/ncu.err"
  say "ncu: exit $?"
  python3 bench/ncu_table.py --last-step gather "$L/ncu.csv" > "$OUT/ncu-strata-gpt2-bf16-fused.md" 2>> "$OUT/summary.txt"
  head -40 "$OUT/ncu-strata-gpt2-bf16-fused.md" | tee -a "$OUT/summary.txt"
fi
for i in 1 2; do
  timeout 100 .gpu/bench-alloc >> "$OUT/bench-alloc.jsonl" 2>> "$OUT/bench-alloc.md"; say "bench-alloc $i: exit $?"
done
grep -E '^\| (pool|manager|cuMemAllocAsync|mixed|4KiB|1MiB|64MiB)' "$OUT/bench-alloc.md" | tee -a "$OUT/summary.txt"
say done
