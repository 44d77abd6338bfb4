#!/usr/bin/env bash
# ad-hoc call 2 (2026-12-02 session 7): new kernels (attention mma2, fused CE, AdamW multi, UnaryTo)
L=/tmp/strata-call2-logs
default_phases="all"
phases="all"
. "$(dirname "$0")/gpu-common.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
(cd cuda && STRATA_REQUIRE_GPU=1 timeout 60 ../.gpu/cuda.test -test.run 'VMM' -test.v > "$L/vmm.log" 2>&1); say "vmm copies: exit $?"
grep -v "^=== RUN" "$L/vmm.log" | head -40 | tee -a "$OUT/summary.txt"
run_gpu_tests tensor autograd nn
(cd tensor && STRATA_ATTENTION=mma1 STRATA_REQUIRE_GPU=1 timeout 100 ../.gpu/tensor.test -test.run 'Attention' -test.v > "$L/tensor-mma1.log" 2>&1); say "tensor attention tests with mma1: exit $?; $(grep -c -- '--- FAIL' "$L/tensor-mma1.log") failed"
for k in mma2 mma1; do
  STRATA_ATTENTION=$k timeout 100 .gpu/bench-attention -device cuda -precision bf16,fp16 -iters 20 > "$OUT/bench-attention-$k.jsonl" 2> "$L/bench-attention-$k.md"
  say "bench-attention $k: exit $?"; grep -E "^\|" "$L/bench-attention-$k.md" | head -12 | tee -a "$OUT/summary.txt"
done
for row in bf16:fused: bf16:fused:mma1 bf16:plain: fp16:fused:; do
  IFS=: read -r prec attn k <<< "$row"
  STRATA_ATTENTION=$k timeout 120 .gpu/train-gpt -config gpt2 -device cuda -bench -steps 10 -precision $prec -attention $attn >> "$res" 2> "$L/bench-$prec-$attn-$k.txt"
  say "train-gpt gpt2 $prec $attn ${k:-mma2}: exit $?; $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*') $(tail -1 "$res" | grep -o '"mfu":[0-9.]*')"
done
timeout 120 .gpu/train-gpt -config char -device cuda -bench -precision fp16 -attention fused >> "$res" 2> "$L/bench-char.txt"
say "train-gpt char fp16 fused: exit $?; $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*')"
# learning: char 300 steps bf16 fused (session 6: 1.5590 plain/fused bf16, fp32 1.5535)
timeout 150 .gpu/train-gpt -config char -device cuda -steps 300 -precision bf16 -attention fused > "$L/char300.log" 2>&1
say "char 300 bf16 fused: exit $?; $(grep -i 'loss' "$L/char300.log" | tail -2 | tr '\n' ' ')"
if [ -n "$NCU" ]; then
  timeout 200 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
    .gpu/train-gpt -config gpt2 -device cuda -bench -steps 1 -bench-warmup 1 -precision bf16 -attention fused > "$L/ncu.csv" 2> "$L/ncu.err"
  say "ncu: exit $?"
  python3 bench/ncu_table.py --last-step gather "$L/ncu.csv" > "$OUT/ncu-strata-gpt2-bf16-fused.md" 2>> "$OUT/summary.txt"
  head -30 "$OUT/ncu-strata-gpt2-bf16-fused.md" | tee -a "$OUT/summary.txt"
  timeout 150 "$NCU" --clock-control none --kernel-name regex:attention_ --launch-skip 6 --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    .gpu/bench-attention -device cuda -precision bf16 -iters 1 > "$OUT/ncu-attention.txt" 2>&1
  say "ncu attention: exit $?"
  grep -E "attention_|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit (Reg|Shared)" "$OUT/ncu-attention.txt" | head -50 | tee -a "$OUT/summary.txt"
fi
say done
