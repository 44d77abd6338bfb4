#!/usr/bin/env bash
# Issue 13's GPU items in one device call, on a machine without Go: build
# here with `make gpu`, then run from the repository root there:
#
#   SOAK_STEPS=0 bash bench/gpu-resilience.sh   # the tests (about 2 minutes)
#   SKIP_TESTS=1 bash bench/gpu-resilience.sh   # the gpt2 soak (fp32: about 7 minutes)
#   bash bench/gpu-resilience.sh                # both, if one call may take 10 minutes
#
# 1. cuda: FailCall on the real driver (an injected cuMemAlloc out of memory
#    and a failed memset come back as errors; the context keeps working).
# 2. train-gpt: a run interrupted after step 5 and resumed gives the
#    uninterrupted run's losses and weights bit for bit on the GPU
#    (TestResumeIsBitIdenticalGPU, float32 with dropout and fp16 with
#    checkpointing); every allocation of a step failed in turn
#    (TestFaultEveryAllocationGPU); every driver and cuBLAS call of a step
#    failed in turn (TestCUDAErrorEveryCall).
# 3. The soak: gpt2 for SOAK_STEPS steps (default 2000) in SOAK_PRECISION
#    (default fp32) with the bytes in use checked flat after every step.
#
# Results go to $OUT (default /tmp/strata-gpu): summary.txt, soak.jsonl and
# the logs.
set -u
OUT=${OUT:-/tmp/strata-gpu}
mkdir -p "$OUT"
say() { echo "== $*" | tee -a "$OUT/summary.txt"; }
if [ -f .gpu/strata-gpu.tar.xz ]; then tar -C .gpu -xJf .gpu/strata-gpu.tar.xz; fi
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$OUT/nvidia-smi.txt"

if [ -z "${SKIP_TESTS:-}" ]; then
start=$(date +%s)
(cd cuda && timeout 120 ../.gpu/cuda.test -test.run 'FailCall' -test.v > "$OUT/cuda-failcall.log" 2>&1)
say "cuda FailCall: exit $? in $(( $(date +%s) - start ))s"; grep -E -- '--- (PASS|FAIL|SKIP)' "$OUT/cuda-failcall.log"

start=$(date +%s)
(cd examples/train-gpt && STRATA_REQUIRE_GPU=1 timeout 400 ../../.gpu/train-gpt.test \
  -test.run 'TestResumeIsBitIdenticalGPU|TestFaultEveryAllocationGPU|TestCUDAErrorEveryCall' -test.v -test.timeout 390s \
  > "$OUT/train-gpt-gpu.log" 2>&1)
say "train-gpt GPU tests: exit $? in $(( $(date +%s) - start ))s"
grep -E -- '--- (PASS|FAIL|SKIP)|points|sweep|Error' "$OUT/train-gpt-gpu.log" | head -40 | tee -a "$OUT/summary.txt"
# The training state file, read by PyTorch's own safetensors loader.
timeout 90 .gpu/train-gpt -device cuda -steps 3 -batch 8 -quiet -eval-every 0 -save-every 2 \
  -out "$OUT/w.safetensors" > "$OUT/state-run.log" 2>&1
say "a 3-step run saving its state: exit $?"
python3 - "$OUT/w.state.safetensors" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import sys
try:
    from safetensors import safe_open
    from safetensors.torch import load_file
except ImportError as e:
    sys.exit(f"safetensors is not installed here: {e}")
t = load_file(sys.argv[1])
with safe_open(sys.argv[1], "pt") as f:
    meta = f.metadata()
print(f"safetensors.torch.load_file: {len(t)} tensors, wte {tuple(t['transformer.wte.weight'].shape)}, "
      f"exp_avg {tuple(t['optimizer.exp_avg.transformer.wte.weight'].shape)}; train.step {meta['train.step']}, "
      f"optimizer.step {meta['optimizer.step']}")
PY
fi

SOAK_STEPS=${SOAK_STEPS:-2000}
if [ "$SOAK_STEPS" -gt 0 ]; then
  start=$(date +%s)
  (cd examples/train-gpt && STRATA_SOAK=$SOAK_STEPS STRATA_SOAK_DEVICE=cuda STRATA_SOAK_CONFIG=gpt2 \
    STRATA_SOAK_PRECISION=${SOAK_PRECISION:-fp32} STRATA_SOAK_OUT=$OUT/soak.jsonl \
    timeout ${SOAK_TIMEOUT:-560} ../../.gpu/train-gpt.test -test.run '^TestSoak$' -test.v -test.timeout 600s > "$OUT/soak.log" 2>&1)
  say "soak gpt2 $SOAK_STEPS steps: exit $? in $(( $(date +%s) - start ))s"
  grep -E 'soak_test|--- ' "$OUT/soak.log" | tail -6 | tee -a "$OUT/summary.txt"
fi
