# Session 51's second call (a lean one, the budget spent on failed starts):
# the GPU runs of this session's nn, checkpoint and train-gpt changes
# (LoadTrainState and LoadWeights through mapped staging memory, Offload's
# per-context records), then the pairs when the card is an H200.
set -u
T0=$(date +%s); nvidia-smi -L; lscpu | grep -E 'Model name|L3' | head -2
cd .gpu && tar xJf all.tar.xz && rm all.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
t() { # PKG BIN RUN: one package's tests on the GPU
  local s=$(date +%s) log=$OUT/$2.log
  (cd $1 && STRATA_REQUIRE_GPU=1 timeout ${TL:-150} $G/$2 -test.v -test.run "$3" > $log 2>&1); local rc=$?
  echo "$1 rc $rc $(( $(date +%s)-s ))s: $(grep -c '^=== RUN' $log) run, $(grep -c -- '--- SKIP' $log) skipped, $(grep -c -- '--- FAIL' $log) failed"
  grep -E -- '--- FAIL|panic:' $log | head -10
}
G=$PWD/.gpu
t nn nn.test 'TrainState|Weights|Load|GPU|Offload|Checkpoint'
t checkpoint checkpoint.test '.'
TL=170 t examples/train-gpt train-gpt.test 'Resume|Weights|State|GPU|Offload|Checkpoint|Reliab'
echo "tests done at $(( $(date +%s)-T0 ))s"
if nvidia-smi -L | grep -q H200; then
  . bench/gpu-calls.sh
  pair_process "as placed 1"; pair_process "pinned 3" taskset -c 3; pair_process "pinned 7" taskset -c 7
fi
echo total $(( $(date +%s)-T0 ))s
