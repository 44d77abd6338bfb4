#!/usr/bin/env bash
# Runs train-gpt on each bad input of issue 13 (and a few more) and prints
# a markdown table row per case: exit code, seconds until it exited, the
# first line it printed about the problem, and whether it left files.
#
#   bash bench/bad-inputs.sh ./train-gpt > table.md
#
# Each case runs in a fresh directory under $WORK (default /tmp/bad-inputs)
# with -device cpu. SKIP_OOM=1 skips -batch 2000000 (for a binary without
# the host memory budget, which the kernel kills after it maps more than
# the machine has); OOM_BUDGET sets the budget that case runs under
# (default 4GiB, so that it fails fast without taking the machine's memory).
set -u
BIN=$(realpath "${1:?usage: bad-inputs.sh TRAIN-GPT-BINARY}")
WORK=${WORK:-/tmp/bad-inputs}
LIMIT=${LIMIT:-120} # seconds before a case is stopped (SIGKILL)
rm -rf "$WORK"; mkdir -p "$WORK"

row() { # name, then the arguments
  local name=$1; shift
  local d=$WORK/$(echo "$name" | tr -c 'a-zA-Z0-9' _)
  mkdir -p "$d/outdir"
  local start end rc msg
  start=$(date +%s.%N)
  (cd "$d" && timeout -s KILL "$LIMIT" "$BIN" -device cpu "$@" > stdout.txt 2> stderr.txt)
  rc=$?
  end=$(date +%s.%N)
  msg=$(grep -m1 -E '^train-gpt: |panic|fatal|flag provided|invalid value|Usage' "$d/stderr.txt" | cut -c1-160)
  [ -z "$msg" ] && msg="(nothing: $(grep -c . "$d/stderr.txt") lines of training output)"
  [ $rc = 137 ] && msg="killed (SIGKILL after ${LIMIT}s, or by the kernel); $msg"
  local files
  files=$(cd "$d" && find . -newer stdout.txt -type f ! -name 'std*.txt' | sort | tr '\n' ' ')
  printf '| %s | %s | %.1f | %s | %s |\n' "$name" "$rc" "$(echo "$end - $start" | bc)" "${msg//|/\\|}" "${files:--}"
}

signal_row() { # name, signal: the default run, signalled after 8 s
  local name=$1 sig=$2
  local d=$WORK/$(echo "$name" | tr -c 'a-zA-Z0-9' _)
  mkdir -p "$d"
  local start end rc
  start=$(date +%s.%N)
  (cd "$d" && exec "$BIN" -device cpu -quiet > stdout.txt 2> stderr.txt) &
  local pid=$!
  sleep 8
  local t0=$(date +%s.%N)
  kill -s "$sig" $pid
  wait $pid
  rc=$?
  end=$(date +%s.%N)
  local msg
  msg=$(grep -m1 -E "train-gpt: .*(after step|again)" "$d/stderr.txt" | cut -c1-160)
  [ -z "$msg" ] && msg="(no message)"
  printf '| %s (after 8 s) | %s | %.1f after the signal | %s | %s |\n' "$name" "$rc" "$(echo "$end - $t0" | bc)" "${msg//|/\\|}" \
    "$(cd "$d" && ls -A | grep -v '^std' | tr '\n' ' ')"
}

echo "| input | exit | seconds | message | files left |"
echo "|---|---|---|---|---|"
row "-out /nonexistent/dir/w.safetensors" -steps 3 -quiet -out /nonexistent/dir/w.safetensors
row "-out DIR (an existing directory)" -steps 3 -quiet -out outdir
row "-out /proc/x" -steps 3 -quiet -out /proc/x
row "-loss-log /nonexistent/l.jsonl" -steps 3 -quiet -loss-log /nonexistent/l.jsonl
row "-memory-trace /nonexistent/t.json" -quiet -memory-trace /nonexistent/t.json
row "-data /nonexistent.txt" -steps 3 -quiet -data /nonexistent.txt
row "-lr NaN" -steps 3 -quiet -lr NaN
row "-lr Inf" -steps 3 -quiet -lr Inf
row "-weight-decay NaN" -steps 3 -quiet -weight-decay NaN
row "-min-lr NaN" -steps 3 -quiet -min-lr NaN
row "-clip NaN" -steps 3 -quiet -clip NaN
row "-clip -1" -steps 3 -quiet -clip -1
row "-batch 0" -steps 3 -quiet -batch 0
row "-steps 0" -quiet -steps 0
row "-max-time -1s" -steps 3 -quiet -max-time -1s
row "-sample -5 (text data)" -steps 3 -quiet -sample -5 -data /etc/services
row "-lr 1e30 (loss NaN from step 2)" -steps 20 -quiet -eval-every 0 -lr 1e30
row "-resume /nonexistent" -steps 3 -quiet -resume /nonexistent
row "-h" -h
if [ -n "${SKIP_OOM:-}" ]; then
  echo "| -batch 2000000 | not run here | | (SKIP_OOM: maps more than the machine has) | |"
else
  STRATA_HOST_MEMORY=${OOM_BUDGET:-4GiB} row "-batch 2000000 (STRATA_HOST_MEMORY=${OOM_BUDGET:-4GiB})" -steps 3 -quiet -batch 2000000
fi
signal_row "SIGINT" INT
signal_row "SIGTERM" TERM
