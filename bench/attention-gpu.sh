#!/usr/bin/env bash
# The fused attention's GPU checks and benchmark (issue 11, point 1) in one
# device call, on a machine without Go (../shared/GPU.md). Build here:
#
#   rm -rf .gpu && mkdir -p .gpu/bin
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .gpu/bin/ ./tensor ./autograd ./nn
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o .gpu/bin/ ./examples/bench-attention ./examples/train-gpt
#   tar -C .gpu/bin -cJf .gpu/attn.tar.xz . && rm -rf .gpu/bin
#
# (or make gpu: without .gpu/attn.tar.xz it unpacks .gpu/strata-gpu.tar.xz)
# then run from the repository root there (carry .gpu):
#
#   bash bench/attention-gpu.sh
#
# It writes $OUT/summary.txt (each step's exit status and failures),
# $OUT/bench-attention.jsonl and .md, $OUT/train-gpt.jsonl and every log.
set -u
OUT=${OUT:-/tmp/strata-attn}
mkdir -p "$OUT" .gpu/bin
# The reduced bundle above, else make gpu's whole one.
for bundle in .gpu/attn.tar.xz .gpu/strata-gpu.tar.xz; do
  if [ -f "$bundle" ]; then tar -C .gpu/bin -xJf "$bundle"; break; fi
done
B=$PWD/.gpu/bin
say() { echo "== $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/summary.txt"
export STRATA_REQUIRE_GPU=1

run_tests() { # package, -test.run pattern
  local log=$OUT/test-$1.log start=$(date +%s)
  (cd "$1" && timeout 280 "$B/$1.test" -test.v -test.timeout 270s -test.run "$2" > "$log" 2>&1)
  say "test $1 ($2): exit $? in $(( $(date +%s) - start ))s; $(grep -c -- '--- PASS' "$log") passed, $(grep -c -- '--- SKIP' "$log") skipped, $(grep -c -- '--- FAIL' "$log") failed"
  grep -E -- '--- FAIL|panic:|Error:|Messages:' "$log" | head -20 | tee -a "$OUT/summary.txt"
}
run_tests tensor 'CUDALaunchersMatchKernels|FatbinHasEveryKernel|KernelSourcesMatchFatbin|CUDAFusedAttentionConformance|CUDAConformance/OpsNN'
run_tests autograd 'FusedCausalAttention.*GPU|GradCheckOnCUDA'
run_tests nn 'GPTFusedAttention'

# Plain against fused at gpt2's attention shape: tensor cores for the
# halves, then the float32-math kernels for them.
timeout 240 "$B/bench-attention" -device cuda -precision fp32,bf16,fp16 -iters 20 \
  > "$OUT/bench-attention.jsonl" 2> "$OUT/bench-attention.md"
say "bench-attention: exit $?"; cat "$OUT/bench-attention.md"
STRATA_ATTENTION=simt timeout 120 "$B/bench-attention" -device cuda -precision bf16 -iters 10 \
  >> "$OUT/bench-attention.jsonl" 2>> "$OUT/bench-attention.md"
say "bench-attention simt bf16: exit $?"; tail -3 "$OUT/bench-attention.md"
timeout 120 "$B/bench-attention" -device cuda -precision bf16 -dropout 0.1 -iters 10 \
  >> "$OUT/bench-attention.jsonl" 2>> "$OUT/bench-attention.md"
say "bench-attention bf16 dropout 0.1: exit $?"; tail -3 "$OUT/bench-attention.md"

# The whole gpt2 step, plain against fused, fp32 and bf16.
for prec in fp32 bf16; do
  for attn in plain fused; do
    timeout 150 "$B/train-gpt" -config gpt2 -device cuda -bench -steps 5 -bench-warmup 2 -precision $prec -attention $attn \
      >> "$OUT/train-gpt.jsonl" 2> "$OUT/train-gpt-$prec-$attn.log"
    say "train-gpt gpt2 $prec $attn: exit $?; $(tail -1 "$OUT/train-gpt.jsonl" | cut -c1-400)"
  done
done
