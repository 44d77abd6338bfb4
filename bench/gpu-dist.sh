#!/usr/bin/env bash
# Data-parallel training over NCCL (issue 15): the GPU tests of the NCCL
# Collective and of train-gpt -gpus, and train-gpt's NCCL path against
# its ordinary one.
#
#   tests  the test binaries with STRATA_REQUIRE_GPU=1 (a missing GPU or
#          NCCL fails; fewer than 2 GPUs skips the multi-GPU tests only):
#          nccl (all), dist (all: NCCL collectives in 4 dtypes, abort,
#          DataParallel and ZeroAdamW over NCCL against no collective,
#          TestGPUNCCLOverlap: the all-reduces overlapped with backward
#          on a communication stream against NoOverlap, bit for bit),
#          tensor (CUDAExport: the device pointer and stream), train-gpt
#          (DataParallel: -gpus 1 through NCCL gives the ordinary losses)
#   train  train-gpt on one GPU, the ordinary path and the NCCL path
#          (STRATA_TRAIN_GPT_NCCL=1: a 1-rank communicator, the gradients
#          through dist.DataParallel's buckets): the loss logs compared
#          step by step (expected: identical), and tokens/s of each; the
#          NCCL path with -no-overlap-reduce against the overlap (char
#          fp32, gpt2 bf16; expected: identical)
#   multi  with 2 or more GPUs (skipped, and said so, on one): -gpus 2
#          (and 4 where present) against 1 GPU on the same global batch,
#          losses compared, with and without -zero1; then gpt2 bf16 with
#          8 rows a GPU, tokens/s against 1 GPU (the issue's scaling row),
#          and with -no-overlap-reduce (what the overlap gains)
#
# Build here: make gpu. Run there (from the repository root):
#   export OUT; bash bench/gpu-dist.sh [phases]
# It prints a summary (also $OUT/summary.txt); the logs are in
# $OUT/logs.tgz, the loss logs among them.
L=/tmp/strata-dist-logs
default_phases="tests train multi"
phases="${*:-$default_phases}"
. "$(dirname "$0")/gpu-common.sh"
t0=$(date +%s)
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

# gtest PKG PATTERN: PKG's test binary, the tests matching PATTERN.
gtest() {
  local pkg=$1 pat=$2 bin log rc start
  bin=$PWD/.gpu/$(basename "$pkg").test log=$L/test-$(basename "$pkg").log
  [ -x "$bin" ] || { say "test $pkg: no binary $bin (make gpu)"; return; }
  start=$(date +%s)
  (cd "$pkg" && STRATA_REQUIRE_GPU=1 timeout 400 "$bin" -test.v -test.timeout 390s -test.run "$pat" > "$log" 2>&1)
  rc=$?
  say "test $pkg -run '$pat': exit $rc in $(( $(date +%s) - start ))s; $(grep -c '^=== RUN' "$log") run, $(grep -c -- '--- SKIP' "$log") skipped, $(grep -c -- '--- FAIL' "$log") failed"
  grep -E -- '--- FAIL|panic:|collected without Release' "$log" | head -15 | tee -a "$OUT/summary.txt"
  # what the GPU tests measured: losses and differences, NCCL's version
  grep -E 'NCCL [0-9]|step [0-9]+: loss|worst relative|rank [0-9]+: ' "$log" | head -30 | tee -a "$OUT/summary.txt"
}

if has tests; then
  gtest nccl .
  gtest dist .
  gtest tensor CUDAExport
  gtest examples/train-gpt DataParallel
fi

# compare A B: the two loss logs step by step, and the tokens/s of the
# two runs' logs A.txt and B.txt (the last progress line: the whole run).
compare() {
  python3 - "$1" "$2" <<'PY'
import json, re, sys
def losses(p):
    try:
        return [json.loads(l)["loss"] for l in open(p + ".jsonl") if l.strip()]
    except OSError:
        return []
def toks(p):
    try:
        m = re.findall(r"([0-9]+) tok/s", open(p + ".txt").read())
        return m[-1] if m else "?"
    except OSError:
        return "?"
a, b = losses(sys.argv[1]), losses(sys.argv[2])
n = min(len(a), len(b))
same = sum(1 for i in range(n) if a[i] == b[i])
worst = max((abs(a[i] - b[i]) / abs(a[i]) for i in range(n) if a[i]), default=float("nan"))
last = "%.6f vs %.6f" % (a[n-1], b[n-1]) if n else "-"
print("%d/%d steps, %d bit-identical, worst relative difference %.3g, last loss %s; tokens/s %s vs %s"
      % (n, max(len(a), len(b)), same, worst, last, toks(sys.argv[1]), toks(sys.argv[2])))
PY
}

# tg NAME ENV ARGS...: one train-gpt run, its loss log $L/NAME.jsonl and
# its output $L/NAME.txt.
tg() {
  local name=$1 envs=$2 rc
  shift 2
  env $envs timeout 300 .gpu/train-gpt -quiet -progress-every 0 -out "" -loss-plot off -sample 0 -eval-every 0 \
    -loss-log "$L/$name.jsonl" "$@" > "$L/$name.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || say "train-gpt $name ($envs $*): exit $rc: $(grep -v '^$' "$L/$name.txt" | tail -2 | tr '\n' ' ')"
  grep -h '^data-parallel:' "$L/$name.txt" | head -1 | sed 's/^/   /' | tee -a "$OUT/summary.txt"
  return $rc
}

# pair NAME ARGS...: the ordinary path and the NCCL path on cuda:0.
pair() {
  local name=$1
  shift
  tg "$name-default" "STRATA_TRAIN_GPT_NCCL=" -device cuda "$@"
  tg "$name-nccl" "STRATA_TRAIN_GPT_NCCL=1" -device cuda "$@"
  say "$name ($*): ordinary vs NCCL path: $(compare "$L/$name-default" "$L/$name-nccl")"
}

if has train; then
  pair addition -config tiny -steps 300
  pair char-fp32 -config char -data README.md -batch 64 -steps 60
  pair char-bf16 -config char -data README.md -batch 64 -steps 60 -precision bf16
  pair gpt2-bf16 -config gpt2 -data README.md -batch 8 -steps 20 -precision bf16
  # The overlap of the buckets' all-reduces with backward (the default)
  # against the all-reduce after backward: identical losses expected.
  for name in char-fp32 gpt2-bf16; do
    case $name in
      char-fp32) args="-config char -data README.md -batch 64 -steps 60" ;;
      gpt2-bf16) args="-config gpt2 -data README.md -batch 8 -steps 20 -precision bf16" ;;
    esac
    # shellcheck disable=SC2086
    tg "$name-nccl-nooverlap" "STRATA_TRAIN_GPT_NCCL=1" -device cuda -no-overlap-reduce $args
    say "$name: NCCL path, overlap vs -no-overlap-reduce: $(compare "$L/$name-nccl" "$L/$name-nccl-nooverlap")"
  done
fi

if has multi; then
  if [ "$ngpu" -lt 2 ]; then
    say "multi: $ngpu GPU(s) here: skipped (needs 2 or more)"
  else
    for n in 2 4 8; do
      [ "$n" -le "$ngpu" ] || continue
      tg "char-1gpu-b$((16 * n))" "" -config char -data README.md -batch $((16 * n)) -steps 40
      tg "char-${n}gpu" "" -gpus $n -config char -data README.md -batch $((16 * n)) -steps 40
      say "char fp32, global batch $((16 * n)): 1 GPU vs $n GPUs: $(compare "$L/char-1gpu-b$((16 * n))" "$L/char-${n}gpu")"
      tg "char-${n}gpu-zero1" "" -gpus $n -zero1 -config char -data README.md -batch $((16 * n)) -steps 40
      say "char fp32, global batch $((16 * n)): 1 GPU vs $n GPUs -zero1: $(compare "$L/char-1gpu-b$((16 * n))" "$L/char-${n}gpu-zero1")"
    done
    tg gpt2-1gpu "" -config gpt2 -precision bf16 -data README.md -batch 8 -steps 30
    for n in 2 4 8; do
      [ "$n" -le "$ngpu" ] || continue
      tg "gpt2-${n}gpu" "" -gpus $n -config gpt2 -precision bf16 -data README.md -batch $((8 * n)) -steps 30
      say "gpt2 bf16, 8 rows a GPU: 1 GPU vs $n GPUs (other batches: read the tokens/s, over the whole run): $(compare "$L/gpt2-1gpu" "$L/gpt2-${n}gpu")"
      tg "gpt2-${n}gpu-nooverlap" "" -gpus $n -no-overlap-reduce -config gpt2 -precision bf16 -data README.md -batch $((8 * n)) -steps 30
      say "gpt2 bf16, 8 rows a GPU, $n GPUs: overlap vs -no-overlap-reduce (identical losses expected; tokens/s): $(compare "$L/gpt2-${n}gpu" "$L/gpt2-${n}gpu-nooverlap")"
      tg "gpt2-${n}gpu-zero1" "" -gpus $n -zero1 -config gpt2 -precision bf16 -data README.md -batch $((8 * n)) -steps 30
      say "gpt2 bf16, 8 rows a GPU: $n GPUs vs $n GPUs -zero1: $(compare "$L/gpt2-${n}gpu" "$L/gpt2-${n}gpu-zero1")"
    done
  fi
fi
say "done at $(( $(date +%s) - t0 ))s"
