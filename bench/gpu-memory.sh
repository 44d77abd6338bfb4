#!/usr/bin/env bash
# GPU checks of issue 12's memory work, on a machine with an NVIDIA GPU and
# no Go toolchain. Build here first with `make gpu`, then run from the
# repository root there (one call of the device tool, about 4 minutes):
#
#   bash bench/gpu-memory.sh
#
# 1. memory's GPU tests: the virtual memory conformance suite on the
#    device, expandable segments' invariants under random workloads with
#    the data checked on the GPU, EmptyCache seen by cuMemGetInfo, the two
#    traces within 1.02, the CUDA manager's default, and the older GPU
#    tests with the new default;
# 2. bench-alloc in three processes: the pairs against cuMemAllocAsync and
#    both traces replayed over device memory, classic and expandable;
# 3. train-gpt -config gpt2 (and char) on the GPU recording step 3's memory
#    history: Chrome trace, snapshot, timeline and segment map.
#
# Results go to $OUT (default /tmp/strata-gpu-memory).
set -u
OUT=${OUT:-/tmp/strata-gpu-memory}
mkdir -p "$OUT"
if [ -f .gpu/strata-gpu.tar.xz ]; then tar -C .gpu -xJf .gpu/strata-gpu.tar.xz; fi
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$OUT/nvidia-smi.txt"

(cd memory && timeout 280 ../.gpu/memory.test -test.run 'GPU' -test.v -test.timeout 270s) > "$OUT/memory-gpu-tests.txt" 2>&1
echo "memory GPU tests: exit $?; $(grep -c -- '--- PASS' "$OUT/memory-gpu-tests.txt") passed, $(grep -c -- '--- SKIP' "$OUT/memory-gpu-tests.txt") skipped, $(grep -c -- '--- FAIL' "$OUT/memory-gpu-tests.txt") failed" | tee "$OUT/summary.txt"
grep -E -- '--- FAIL|panic:|expandable segments: reserved' "$OUT/memory-gpu-tests.txt" | head -20 | tee -a "$OUT/summary.txt"

for i in 1 2 3; do
  # Expandable segments are opt-in on the device (memory/doc.go); the
  # replay only allocates, which works on the mapped ranges.
  STRATA_EXPANDABLE_SEGMENTS=1 timeout 120 .gpu/bench-alloc -trace bench/traces/trace-char-fp32.csv -trace bench/traces/trace-char-fp16-ckpt.csv \
    >> "$OUT/bench-alloc.jsonl" 2>> "$OUT/bench-alloc.md"
  echo "bench-alloc process $i: exit $?" | tee -a "$OUT/summary.txt"
done
grep -E '^\| (pool|manager|cuMemAllocAsync|trace-|mixed|4KiB|1MiB|64MiB)' "$OUT/bench-alloc.md" | tee -a "$OUT/summary.txt"

for cfg in gpt2 char; do
  timeout 150 .gpu/train-gpt -config $cfg -device cuda -memory-step 3 \
    -memory-trace "$OUT/$cfg-step3.json" -memory-plot "$OUT/$cfg-step3.png" > "$OUT/train-gpt-$cfg.log" 2>&1
  echo "train-gpt $cfg memory capture: exit $?; $(tail -1 "$OUT/train-gpt-$cfg.log")" | tee -a "$OUT/summary.txt"
done
ls -la "$OUT"
