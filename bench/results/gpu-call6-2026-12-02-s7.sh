#!/usr/bin/env bash
# ad-hoc call 6 (2026-12-02 session 7): the cuda tests after the cuBLAS-family call refactor, one training row
L=/tmp/strata-call6-logs
default_phases="all"
phases="all"
. "$(dirname "$0")/gpu-common.sh"
run_gpu_tests cuda
timeout 100 .gpu/train-gpt -config gpt2 -device cuda -bench -precision bf16 >> "$res" 2> "$L/row.txt"
say "train-gpt gpt2 bf16: exit $?; $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*')"
say done
