#!/usr/bin/env bash
# The first GPU call after session 8 (which had no device time): checks
# and measures what that session built on the CPU alone.
#
#   tests      the GPU suites of cuda, tensor, autograd and nn with
#              STRATA_REQUIRE_GPU=1 (the in-place attention's CUDA tests,
#              the leak check of the suites), and compute-sanitizer memcheck
#              on the in-place attention tests when the tool is there
#   attention  bench-attention bf16: plain, fused, fused+split (the heads
#              copied) and fused-qkv (read in place)
#   train      gpt2 bf16 and fp16 and char fp16 with the in-place
#              attention and with STRATA_ATTENTION_QKV=copy, alternating
#   torch      PyTorch eager SDPA bf16 gpt2 and fp16 char in the same call
#   adamw      the host-CPU AdamW step over gpt2's parameters at the host's
#              core count (issue 10's comparison)
#
# Build here: make gpu (its test binaries include cuda, tensor, autograd,
# nn and tensor/internal/cpukern, its programs train-gpt and
# bench-attention); copy ../shared/anchors/torch_gpt.py into .gpu for the
# torch phase. Run there: OUT=... bash bench/gpu-qkv.sh [phases]
L=/tmp/strata-qkv-logs
default_phases="tests attention train torch adamw"
phases="${*:-$default_phases}"
. "$(dirname "$0")/gpu-common.sh"
t0=$(date +%s)

if has tests; then
  run_gpu_tests cuda tensor autograd nn
  if command -v compute-sanitizer > /dev/null; then
    (cd tensor && STRATA_REQUIRE_GPU=1 timeout 200 compute-sanitizer --tool memcheck ../.gpu/tensor.test \
      -test.run 'TestFusedAttentionQKVMatchesSplitHeads' -test.timeout 190s > "$L/sanitizer-tensor.log" 2>&1)
    say "compute-sanitizer tensor QKV: exit $?; $(grep -E 'ERROR SUMMARY' "$L/sanitizer-tensor.log" | tail -1)"
  else
    say "compute-sanitizer: not installed"
  fi
fi

if has attention; then
  timeout 90 .gpu/bench-attention -device cuda -precision bf16 -iters 20 > "$OUT/bench-attention.jsonl" 2> "$L/bench-attention.md"
  say "bench-attention bf16: exit $?"
  grep -E '^\| cuda' "$L/bench-attention.md" | tee -a "$OUT/summary.txt"
fi

n=0
row() { # env... -- train-gpt args
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  n=$((n + 1))
  env "${envs[@]}" timeout 100 .gpu/train-gpt -device cuda -bench "$@" >> "$res" 2> "$L/row-$n.txt"
  local rc=$?
  if [ $rc -ne 0 ]; then say "train-gpt ${envs[*]} $*: exit $rc: $(tail -1 "$L/row-$n.txt")"; return; fi
  say "train-gpt ${envs[*]} $*: $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*') $(tail -1 "$res" | grep -o '"kernel_launches_per_step":[0-9]*') $(tail -1 "$res" | grep -o '"loss":[0-9.]*')"
}
if has train; then
  for rep in 1 2; do
    row X=1 -- -config gpt2 -precision bf16
    row STRATA_ATTENTION_QKV=copy -- -config gpt2 -precision bf16
  done
  row X=1 -- -config gpt2 -precision fp16
  row STRATA_ATTENTION_QKV=copy -- -config gpt2 -precision fp16
  row X=1 -- -config char -precision fp16
  row STRATA_ATTENTION_QKV=copy -- -config char -precision fp16
fi

if has torch && [ -f .gpu/torch_gpt.py ]; then
  (cd .gpu && timeout 150 python3 ../bench/torch_rows.py gpt2:bf16:1:0 char:fp16:1:0) >> "$res" 2> "$L/torch.txt"
  say "pytorch eager sdpa: exit $?"
  grep -h '"tok' "$res" | tail -2 | cut -c1-300 | tee -a "$OUT/summary.txt"
fi

if has adamw && [ -x .gpu/cpukern.test ]; then
  (cd tensor/internal/cpukern && timeout 120 ../../../.gpu/cpukern.test -test.run xxx -test.bench 'BenchmarkAdamWGPT2' \
    -test.benchtime 5x -test.cpu "$(nproc)" > "$L/adamw-host.txt" 2>&1)
  say "host-CPU AdamW over gpt2 ($(nproc) cores): exit $?; $(grep Benchmark "$L/adamw-host.txt")"
fi
say "done at $(( $(date +%s) - t0 ))s"
