#!/usr/bin/env bash
# The GPU gate of session 45's candidate placement rule
# (boundary-rule-16pages.patch), for the next session with device time.
#
# Here (no GPU), from the repository root:
#   git stash -u   # a clean tree
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /tmp/gate/tg-base ./examples/train-gpt
#   git apply bench/results/cpu-placement-s45/boundary-rule-16pages.patch
#   git apply bench/results/cpu-placement-s45/steps-log-roles.patch   # the steps log with roles:
#     "a ID SIZE STREAM ROLE" (the candidate's test reader takes the fifth field)
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /tmp/gate/tg-rec ./examples/train-gpt
#   git checkout . && git stash pop
#   (cd /tmp/gate && tar cf - * | xz -T2 > /work/main/.gpu/gate.tar.xz)
# There (run with carry [".gpu"]): bash bench/results/cpu-placement-s45/gate-candidate.sh
# Then here: cut the two logs after their setup and first 10 steps into
# memory/testdata/live-*-roles-h100.steps.gz (testdata/README.md), point
# TestPlanStepsLiveRecordings at them with the candidate applied, and keep
# the rule only if the live ratios below match base within a page.
set -u
T0=$(date +%s); nvidia-smi -L
cd .gpu && tar xJf gate.tar.xz && rm gate.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
A="-config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
C="-config char -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
cp .gpu/tg-base .gpu/train-gpt; live_bench gpt2-base X=1 $A
cp .gpu/tg-rec .gpu/train-gpt; live_bench gpt2-new STRATA_STEPS_LOG=/tmp/gpt2.steps $A
cp .gpu/tg-base .gpu/train-gpt; live_bench char-base X=1 $C
cp .gpu/tg-rec .gpu/train-gpt; live_bench char-new STRATA_STEPS_LOG=/tmp/char.steps $C
gzip -c /tmp/gpt2.steps > "$OUT/live-gpt2-roles.steps.gz"; gzip -c /tmp/char.steps > "$OUT/live-char-roles.steps.gz"
echo total $(( $(date +%s)-T0 ))s
