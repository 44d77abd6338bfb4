#!/usr/bin/env bash
# Where a gpt2 training step's GPU time goes, measured without the
# per-launch synchronization of STRATA_CUDA_PROFILE: Nsight Compute's
# gpu__time_duration of every kernel of one step (ncu, --clock-control
# none), strata against PyTorch eager in the same call. Build here with
# `make gpu` (or the reduced bundle of the session notes), copy
# ../shared/anchors/torch_gpt.py into .gpu/, then run from the repository
# root there:
#
#   bash bench/gpu-profile.sh tests base ncu torch
#
# tests  the cuda and nccl test binaries (a 1-rank NCCL communicator)
# base   train-gpt -bench on gpt2 (B8 T1024): bf16 and fp16, plain and
#        fused attention (PROFILE_ROWS overrides, rows
#        "prec:attention:head[:checkpoint[:config]]")
# ncu    ncu over train-gpt gpt2 -steps 1 -bench-warmup 1 (PROFILE_PREC,
#        default bf16; PROFILE_ARGS adds flags): the kernels' CSV, summed by
#        kernel name over the last step (tools: bench/ncu_table.py)
# attn   bench-attention at gpt2's shape (bf16), and ncu's speed-of-light,
#        occupancy and launch sections for each fused attention kernel
# torch  PyTorch eager gpt2 fp16 and bf16, plain attention, and the same
#        under ncu for its per-kernel table
#
# Results go to $OUT: summary.txt, results.jsonl, the ncu tables (*.md) and
# logs.tgz.
L=/tmp/strata-profile-logs
default_phases="tests base ncu torch"
phases="$*"
. "$(dirname "$0")/gpu-common.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)

if has tests; then
  run_gpu_tests ${TEST_PKGS:-cuda nccl}
  grep -h -E -- '--- (PASS|FAIL|SKIP): TestGPU' "$L"/test-nccl.log 2>/dev/null | tee -a "$OUT/summary.txt"
fi

if has base; then
  # A row is precision:attention:head[:checkpoint[:config]], gpt2 and
  # no checkpointing unless named.
  for row in ${PROFILE_ROWS:-bf16:plain:full bf16:fused:full fp16:plain:full fp32:plain:full}; do
    IFS=: read -r prec attn head ckpt cfg <<< "$row"
    cfg=${cfg:-gpt2} ckpt=${ckpt:-none}
    timeout 200 .gpu/train-gpt -config $cfg -device cuda -bench -steps 10 -precision $prec -attention $attn -head ${head:-auto} -checkpoint $ckpt \
      >> "$res" 2> "$L/bench-$cfg-$prec-$attn-$head-$ckpt.txt"
    say "train-gpt $cfg $prec attention $attn head $head checkpoint $ckpt: exit $?; $(tail -1 "$res" | grep -o '"tok_s":[0-9]*') tok/s, $(tail -1 "$res" | grep -o '"peak_mib":[0-9]*') MiB, $(tail -1 "$res" | grep -o '"peak_activation_bytes":[0-9]*'), $(tail -1 "$res" | grep -o '"mfu":[0-9.]*')"
  done
fi

if has ncu; then
  if [ -z "$NCU" ]; then say "ncu: not found"; else
    prec=${PROFILE_PREC:-bf16}
    start=$(date +%s)
    timeout 400 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      .gpu/train-gpt -config gpt2 -device cuda -bench -steps 1 -bench-warmup 1 -precision $prec ${PROFILE_ARGS:-} \
      > "$L/ncu-strata-$prec.csv" 2> "$L/ncu-strata-$prec.err"
    say "ncu strata gpt2 $prec: exit $? in $(( $(date +%s) - start ))s, $(grep -c gpu__time_duration "$L/ncu-strata-$prec.csv") kernels"
    python3 bench/ncu_table.py --last-step gather "$L/ncu-strata-$prec.csv" > "$OUT/ncu-strata-gpt2-$prec.md" 2>> "$OUT/summary.txt"
    head -45 "$OUT/ncu-strata-gpt2-$prec.md" | tee -a "$OUT/summary.txt"
  fi
fi

if has attn && [ -x .gpu/bench-attention ]; then
  timeout 120 .gpu/bench-attention -device cuda -precision bf16,fp16 -iters 20 > "$OUT/bench-attention.jsonl" 2> "$L/bench-attention.md"
  say "bench-attention: exit $?"; cat "$L/bench-attention.md" | tee -a "$OUT/summary.txt"
  if [ -n "$NCU" ]; then
    timeout 200 "$NCU" --clock-control none --kernel-name regex:attention_ --launch-skip 6 --launch-count 6 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      .gpu/bench-attention -device cuda -precision bf16 -iters 1 > "$OUT/ncu-attention.txt" 2>&1
    say "ncu attention: exit $?"
    grep -E "attention_|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Shared Memory Config|Block Limit|Executed Ipc|Issue Slots" "$OUT/ncu-attention.txt" | head -80 | tee -a "$OUT/summary.txt"
  fi
fi

if has torch && [ -f .gpu/torch_gpt.py ]; then
  (cd .gpu && timeout 300 python3 ../bench/torch_rows.py --env AMP_TORCH gpt2:fp16:0:0 gpt2:bf16:0:0) >> "$res" 2> "$L/torch.txt"
  say "pytorch eager: exit $?"; tail -2 "$res"
  if [ -n "$NCU" ] && [ -z "${NO_TORCH_NCU:-}" ]; then
    cat > "$L/torch_one.py" <<'PY'
import sys, torch
sys.path.insert(0, ".gpu")
import torch_gpt as t
torch.backends.cuda.matmul.allow_tf32 = False
t.run("gpt2", "bf16", False, False, steps=1, warm=1)
PY
    start=$(date +%s)
    timeout 400 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      python3 "$L/torch_one.py" > "$L/ncu-torch-bf16.csv" 2> "$L/ncu-torch-bf16.err"
    say "ncu pytorch gpt2 bf16: exit $? in $(( $(date +%s) - start ))s"
    python3 bench/ncu_table.py --last-step "indexSelect:2" "$L/ncu-torch-bf16.csv" > "$OUT/ncu-torch-gpt2-bf16.md" 2>> "$OUT/summary.txt"
    head -45 "$OUT/ncu-torch-gpt2-bf16.md" | tee -a "$OUT/summary.txt"
  fi
fi
say "done"
