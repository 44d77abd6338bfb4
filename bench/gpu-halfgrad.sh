#!/usr/bin/env bash
# Session 9's GPU calls: the half-precision activation path (half
# gradients, LayerNormHalf, LinearHalf) checked and measured against
# PyTorch and llm.c in the same call.
#
#   tests    the GPU suites of cuda, tensor, autograd, nn, checkpoint, amp
#            (STRATA_REQUIRE_GPU=1)
#   train    gpt2 bf16 (twice), gpt2 fp16, char fp16, gpt2 fp32 and tf32
#   ckpt     gpt2 fp16 with checkpointing of every block and selective
#   cpuprof  train-gpt gpt2 bf16 -bench -steps 40 -cpuprofile: the host's side
#   ncu      one gpt2 step's kernels (ncu, bench/ncu_table.py) at each of
#            NCU_PRECISIONS (default bf16), NCU_ARGS added to train-gpt's
#   torch    PyTorch eager SDPA: gpt2 bf16, char fp16 (TORCH_ROWS replaces
#            the rows, as bench/torch_rows.py takes them)
#   ncutorch one PyTorch eager step's kernels (ncu) for each NCU_TORCH row
#            (config:mode:sdpa, default gpt2:fp32:1)
#   compile  torch.compile SDPA: gpt2 bf16, char fp16
#   llmc     llm.c bf16 and fp32 (../shared/anchors/llmc copied to .gpu/llmc)
#   ab       gpt2 bf16, .gpu/train-gpt against each variant binary in
#            .gpu/ab.tar.xz (train-gpt-NAME, built from patched worktrees),
#            alternating, AB_REPS times (default 2); AB_ARGS replaces
#            the rows' flags (-config gpt2 -precision bf16). A variant
#            runs the fatbin it embeds (STRATA_KERNELS unset), so with
#            FRESH_KERNELS=1 the A/B is new kernels against old ones
#   attn32   gpt2 fp32 and tf32 with each float32 attention, alternating
#            AB_REPS times: fp32 fused (three TF32 products), fused with
#            STRATA_ATTENTION=simt (float32 math) and plain; tf32 fused
#            (TF32) and plain
#   graph    -cuda-graph off and on, alternating GRAPH_REPS times (default
#            2), over GRAPH_ROWS (config:precision, default tiny:bf16
#            char:bf16 char:fp32 gpt2:bf16 gpt2:fp32), after train-gpt's
#            GPU tests (TestGPUCUDAGraphSameLosses among them; GRAPH_TESTS=0
#            skips them)
#   addition the default task (train-gpt -device cuda -precision bf16):
#            its held-out accuracy
#   cencu    ncu's speed-of-light, occupancy, compute and memory sections
#            of the fused cross-entropy kernel in a gpt2 step at
#            CENCU_PRECISION (default bf16; fp32's took 5.1 ms a step
#            against PyTorch's 3.2 in session 14)
#
# Build here: make gpu; cp ../shared/anchors/torch_gpt.py .gpu/;
# cp -r ../shared/anchors/llmc .gpu/. Run there:
#   export OUT; bash bench/gpu-halfgrad.sh [phases]
L=/tmp/strata-halfgrad-logs
default_phases="tests train cpuprof ncu torch"
phases="${*:-$default_phases}"
. "$(dirname "$0")/gpu-common.sh"
t0=$(date +%s)
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
field() { tail -1 "$res" | grep -o "\"$1\":[0-9.]*"; }

has tests && run_gpu_tests cuda tensor autograd nn checkpoint amp

n=0
row() { # train-gpt args
  n=$((n + 1))
  timeout 150 .gpu/train-gpt -device cuda -bench "$@" >> "$res" 2> "$L/row-$n.txt"
  local rc=$?
  if [ $rc -ne 0 ]; then say "train-gpt $*: exit $rc: $(tail -1 "$L/row-$n.txt")"; return; fi
  say "train-gpt $*: $(field tok_s) $(field peak_mib) $(field peak_activation_bytes) $(field kernel_launches_per_step) $(field loss)"
}
if has train; then
  row -config gpt2 -precision bf16
  row -config gpt2 -precision fp16
  row -config char -precision fp16
  row -config gpt2 -precision bf16
  if [ -z "${NO_FP32:-}" ]; then # NO_FP32=1: the mixed-precision rows only
    row -config gpt2 -precision fp32
    row -config gpt2 -precision tf32
  fi
fi
if has ckpt; then
  row -config gpt2 -precision fp16 -checkpoint blocks
  row -config gpt2 -precision fp16 -checkpoint selective
fi

if has ab && [ -f .gpu/ab.tar.xz ]; then
  mkdir -p .gpu/ab && tar -C .gpu/ab -xJf .gpu/ab.tar.xz
  for rep in $(seq "${AB_REPS:-2}"); do
    for bin in .gpu/train-gpt .gpu/ab/train-gpt-*; do
      n=$((n + 1))
      # A variant runs the fatbin it embeds, not FRESH_KERNELS' build.
      unset_k=(); [ "$bin" != .gpu/train-gpt ] && unset_k=(-u STRATA_KERNELS)
      timeout 120 env "${unset_k[@]}" "$bin" -device cuda -bench ${AB_ARGS:--config gpt2 -precision bf16} >> "$res" 2> "$L/ab-$n.txt"
      say "ab $(basename "$bin") rep $rep: exit $?; $(field tok_s) $(field peak_mib) $(field loss)"
    done
  done
fi

if has attn32; then
  for rep in $(seq "${AB_REPS:-2}"); do
    for v in "fp32 fused" "fp32 fused simt" "fp32 plain" "tf32 fused" "tf32 plain"; do
      set -- $v; n=$((n + 1))
      timeout 120 env ${3:+STRATA_ATTENTION=$3} .gpu/train-gpt -device cuda -bench -config gpt2 -precision "$1" -attention "$2" >> "$res" 2> "$L/attn32-$n.txt"
      say "attn32 $v rep $rep: exit $?; $(field tok_s) $(field peak_mib) $(field loss)"
    done
  done
fi

if has graph && [ "${GRAPH_TESTS:-1}" != 0 ]; then # GRAPH_TESTS=0: the rows only
  (cd examples/train-gpt && STRATA_REQUIRE_GPU=1 timeout 240 ../../.gpu/train-gpt.test -test.run 'GPU' -test.v > "$L/test-train-gpt.log" 2>&1)
  say "test train-gpt -run GPU: exit $?; $(grep -c -- '--- PASS' "$L/test-train-gpt.log") passed, $(grep -c -- '--- FAIL' "$L/test-train-gpt.log") failed"
  grep -E -- '--- FAIL|panic:|Error:|cuda-graph on:' "$L/test-train-gpt.log" | head -15 | tee -a "$OUT/summary.txt"
fi
if has graph; then
  for rep in $(seq "${GRAPH_REPS:-2}"); do
    for r in ${GRAPH_ROWS:-tiny:bf16 char:bf16 char:fp32 gpt2:bf16 gpt2:fp32}; do
      for g in off on; do row -config "${r%%:*}" -precision "${r##*:}" -cuda-graph "$g"; done
    done
  done
fi

if has addition; then
  timeout 200 .gpu/train-gpt -device cuda -precision bf16 -out "" -progress-every 0 > "$L/addition.txt" 2>&1
  say "addition task bf16: exit $?; $(grep -iE 'held-out|accuracy' "$L/addition.txt" | tail -2 | tr '\n' ' ')"
fi

if has cencu && [ -n "$NCU" ]; then
  timeout 200 "$NCU" --clock-control none --kernel-name regex:cross_entropy_fused --launch-skip 4 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    .gpu/train-gpt -config gpt2 -device cuda -bench -steps 1 -bench-warmup 1 -precision "${CENCU_PRECISION:-bf16}" -cuda-graph off > "$OUT/ncu-ce.txt" 2>&1
  say "ncu cross-entropy: exit $?"
  grep -E "cross_entropy|Duration|Throughput|Occupancy|Registers Per|Block Limit|Executed Ipc|Issue Slots|L2 Hit|Mem Busy|Max Bandwidth" "$OUT/ncu-ce.txt" | head -40 | tee -a "$OUT/summary.txt"
fi

if has cpuprof; then
  timeout 120 .gpu/train-gpt -device cuda -bench -steps 40 -config gpt2 -precision bf16 -cpuprofile "$OUT/cpu-gpt2-bf16.pprof" >> "$res" 2> "$L/cpuprof.txt"
  say "cpuprofile gpt2 bf16 40 steps: exit $?; $(field tok_s)"
fi

if has ncu; then
  if [ -z "$NCU" ]; then say "ncu: not found"; else
    for prec in ${NCU_PRECISIONS:-bf16}; do # NCU_PRECISIONS="bf16 fp32 tf32"
      start=$(date +%s)
      timeout 300 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        .gpu/train-gpt -config gpt2 -device cuda -bench -steps 1 -bench-warmup 1 -precision "$prec" ${NCU_ARGS:-} \
        > "$L/ncu-strata-$prec.csv" 2> "$L/ncu-strata-$prec.err"
      say "ncu strata gpt2 $prec: exit $? in $(( $(date +%s) - start ))s"
      python3 bench/ncu_table.py --last-step gather "$L/ncu-strata-$prec.csv" > "$OUT/ncu-strata-gpt2-$prec.md" 2>> "$OUT/summary.txt"
      head -${NCU_ROWS:-30} "$OUT/ncu-strata-gpt2-$prec.md" | tee -a "$OUT/summary.txt"
    done
  fi
fi

if has ncutorch && [ -n "$NCU" ] && [ -f .gpu/torch_gpt.py ]; then
  for row in ${NCU_TORCH:-gpt2:fp32:1}; do # config:mode:sdpa
    IFS=: read -r cfg mode sdpa <<< "$row"
    cat > "$L/torch_one.py" <<PY
import sys, torch
sys.path.insert(0, ".gpu")
import torch_gpt as t
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
t.run("$cfg", "$mode", $([ "$sdpa" = 1 ] && echo True || echo False), False, steps=1, warm=1)
PY
    start=$(date +%s)
    timeout 300 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      python3 "$L/torch_one.py" > "$L/ncu-torch-$cfg-$mode.csv" 2> "$L/ncu-torch-$cfg-$mode.err"
    say "ncu pytorch $row: exit $? in $(( $(date +%s) - start ))s"
    python3 bench/ncu_table.py --last-step "indexSelect:2" "$L/ncu-torch-$cfg-$mode.csv" > "$OUT/ncu-torch-$cfg-$mode.md" 2>> "$OUT/summary.txt"
    head -${NCU_ROWS:-30} "$OUT/ncu-torch-$cfg-$mode.md" | tee -a "$OUT/summary.txt"
  done
fi

if has torch && [ -f .gpu/torch_gpt.py ]; then
  rows=${TORCH_ROWS:-gpt2:bf16:1:0 char:fp16:1:0}
  (cd .gpu && timeout 240 python3 ../bench/torch_rows.py $rows) >> "$res" 2> "$L/torch.txt"
  say "pytorch eager ($rows): exit $?"
  grep -h '"tok' "$res" | grep '"compile": false' | tail -$(wc -w <<< "$rows") | cut -c1-300 | tee -a "$OUT/summary.txt"
fi

if has compile && [ -f .gpu/torch_gpt.py ]; then
  cat > "$L/compile.py" <<'PY'
import sys, torch
sys.path.insert(0, ".gpu")
import torch_gpt as t
torch.backends.cuda.matmul.allow_tf32 = False
for name, mode in (("gpt2", "bf16"), ("char", "fp16")):
    try:
        t.run(name, mode, sdpa=True, ckpt=False, compile=True, warm=5, steps=10)
    except Exception as e:
        print("compile failed", name, mode, repr(e)[:200], flush=True)
PY
  timeout 300 python3 "$L/compile.py" >> "$res" 2> "$L/compile.txt"
  say "torch.compile: exit $?"; grep -h '"compile": true' "$res" | tail -2 | cut -c1-300 | tee -a "$OUT/summary.txt"
fi

if has llmc && [ -f .gpu/llmc/run.sh ]; then
  timeout 400 bash .gpu/llmc/run.sh 40 > "$L/llmc.txt" 2>&1
  say "llm.c: exit $?"; tee -a "$OUT/summary.txt" < "$L/llmc.txt" | tail -20
fi
say "done at $(( $(date +%s) - t0 ))s"
