#!/usr/bin/env bash
# One GPU session on a machine with an NVIDIA GPU but no Go toolchain
# (../shared/GPU.md). Build here first with `make gpu` (test binaries and
# programs into .gpu/), copy ../shared/anchors/torch_gpt.py into .gpu/,
# then run from the repository root there:
#
#   bash bench/gpu-session.sh tests   # kernels, every package's tests, loss check
#   bash bench/gpu-session.sh bench   # allocation + training benchmarks, PyTorch beside
#   bash bench/gpu-session.sh golden  # PyTorch's fp16 autocast golden GPT, and nn's test of it
#   bash bench/gpu-session.sh amp profile   # every precision and checkpoint mode, PyTorch beside
#   bash bench/gpu-session.sh converge      # fp32/fp16/bf16 losses on a text; default task in bf16
#   bash bench/gpu-session.sh fused         # fused attention checks and benchmarks, gpt2 fp16 fused
#   bash bench/gpu-session.sh tests sweep   # several phases in one go (all = every phase)
#
# Results go to $OUT (default /tmp/strata-gpu): summary.txt, results.jsonl,
# kernels.fatbin, logs.tgz (every log).
set -u
OUT=${OUT:-/tmp/strata-gpu}
L=/tmp/strata-logs
rm -rf "$L"; mkdir -p "$L" "$OUT"
phases="${*:-tests}"
# all: every phase, but not the no* switches (notorch, notorchfused).
has() { case " $phases " in *" $1 "*) return 0;; esac; case $1 in no*) return 1;; esac; case " $phases " in *" all "*) return 0;; esac; return 1; }
res=$OUT/results.jsonl
say() { echo "== $*" | tee -a "$L/summary.txt" "$OUT/summary.txt"; }  # $OUT's copy survives a timeout

if [ -f .gpu/strata-gpu.tar.xz ]; then tar -C .gpu -xJf .gpu/strata-gpu.tar.xz; fi
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$L/nvidia-smi.txt"
if command -v nvcc >/dev/null && [ -f kernels/all.cu ]; then
  nvcc --version | tail -1
  if nvcc -fatbin -gencode arch=compute_90,code=sm_90 -gencode 'arch=compute_80,code=[sm_80,compute_80]' \
      -o "$OUT/kernels.fatbin" kernels/all.cu > "$L/nvcc.txt" 2>&1; then
    if [ -n "${FRESH_KERNELS:-}" ]; then
      export STRATA_KERNELS=$OUT/kernels.fatbin
      say "kernels: built with $(nvcc --version | tail -1), testing the fresh fatbin"
    else
      say "kernels: nvcc $(nvcc --version | tail -1) compiles them; testing the embedded fatbin (FRESH_KERNELS=1 tests the fresh one)"
    fi
  else
    say "kernels: nvcc FAILED (see nvcc.txt); testing the embedded fatbin"; tail -20 "$L/nvcc.txt"
  fi
fi

if has tests; then
  for pkg in cuda memory tensor autograd nn amp checkpoint interop/gorgonia; do
    bin=$PWD/.gpu/$(basename $pkg).test log=$L/test-$(basename $pkg).log
    [ -x "$bin" ] || continue
    start=$(date +%s)
    (cd $pkg && timeout 300 "$bin" -test.v -test.timeout 290s > "$log" 2>&1)
    rc=$?
    say "test $pkg: exit $rc in $(( $(date +%s) - start ))s; $(grep -c '^=== RUN' "$log") run, $(grep -c -- '--- SKIP' "$log") skipped, $(grep -c -- '--- FAIL' "$log") failed"
    grep -E -- '--- FAIL|panic:' "$log" | head -15
  done
  # The char shape's first 50 steps on the GPU against the CPU reference,
  # on full 256-byte rows of a text any machine can make the same.
  seq 1 5000 > /tmp/strata-seq.txt
  timeout 240 .gpu/train-gpt -config char -device cuda -batch 8 -steps 50 -eval-every 0 -quiet -out "" \
    -data /tmp/strata-seq.txt -sample 0 -loss-log "$L/char-gpu-50.jsonl" > "$L/char-gpu-50.log" 2>&1
  say "char 50 steps on cuda: exit $?"
  python3 - "$L/char-gpu-50.jsonl" bench/results/char-cpu-b8-50steps-seq-s27.jsonl <<'PY' | tee -a "$L/summary.txt"
import json, sys
g = [json.loads(l)["loss"] for l in open(sys.argv[1])]
c = [json.loads(l)["loss"] for l in open(sys.argv[2])]
n = min(len(g), len(c))
worst = max((abs(a - b) / abs(b), i + 1) for i, (a, b) in enumerate(zip(g[:n], c[:n]))) if n else (float("nan"), 0)
print(json.dumps({"check": "char_gpu_vs_cpu_50_steps", "steps": n, "max_rel_diff": worst[0], "at_step": worst[1],
                  "gpu_first_last": [g[0], g[n-1]] if n else None, "cpu_first_last": [c[0], c[n-1]] if n else None}))
PY
  # The default run learns on the GPU as on the CPU.
  timeout 300 .gpu/train-gpt -quiet -eval-every 1000 -out "$OUT/gpt-gpu.safetensors" > "$L/train-default-gpu.log" 2>&1
  say "default run on the GPU: exit $?"; grep -E "^step" "$L/train-default-gpu.log" | tail -4
fi

if has sweep; then
  # Robustness of the default task across seeds (GPU runs are deterministic:
  # a seed always gives the same run).
  for seed in 1 2 3 4 5 6 7 8 9 10 11 12; do
    acc=$(timeout 90 .gpu/train-gpt -quiet -eval-every 0 -out "" -seed $seed 2>&1 | grep -E '^step' | tail -1)
    say "sweep default seed=$seed: $acc"
  done
fi

if has bench; then
  if [ -x .gpu/bench-alloc ]; then
    # Three processes: the host's noise differs from one to the next.
    for i in 1 2 3; do
      timeout 240 .gpu/bench-alloc > "$L/bench-alloc-$i.json" 2> "$L/bench-alloc-$i.txt"; say "bench-alloc run $i: exit $?"
      grep -A6 '^| workload | pool vs' "$L/bench-alloc-$i.txt" | tee -a "$L/summary.txt"; cat "$L/bench-alloc-$i.json" >> "$res"
    done
    cat "$L/bench-alloc-1.txt"
    for tr in bench/traces/*.csv; do
      [ -f "$tr" ] && timeout 120 .gpu/bench-alloc -no-bench -trace "$tr" >> "$res" 2>> "$L/bench-alloc-traces.txt"
    done
    cat "$L/bench-alloc-traces.txt"
  fi
  # The hybrid placement against every tensor in one tier (the seed's
  # comparison: device memory only, unified memory only, zero-copy only).
  for run in char:hybrid char:device char:managed char:staging gpt2:hybrid gpt2:device; do
    cfg=${run%%:*}; pol=${run#*:}
    timeout 200 .gpu/train-gpt -config $cfg -policy $pol -device cuda -bench -steps 10 >> "$res" 2> "$L/bench-$cfg-$pol.txt"
    say "train bench $cfg policy $pol: exit $?"; grep -A2 '^| config' "$L/bench-$cfg-$pol.txt" | tail -1
  done
  if has profile; then
    for cfg in gpt2; do
      STRATA_CUDA_PROFILE=1 timeout 200 .gpu/train-gpt -config $cfg -device cuda -bench -steps 2 -bench-warmup 2 > /dev/null 2> "$L/profile-$cfg.txt"
      say "profile $cfg: exit $?"; grep -A25 'kernel profile' "$L/profile-$cfg.txt" | head -30
    done
  fi
  if [ -f .gpu/torch_gpt.py ] && ! has notorch; then
    (cd .gpu && OUT=$L timeout 300 python3 ../bench/torch_rows.py char:fp32:0:0 char:fp32:1:0 gpt2:fp32:0:0 gpt2:fp32:1:0) >> "$res" 2> "$L/torch.txt"
    say "pytorch: exit $?"; tail -3 "$L/torch.txt"
  fi
  cat "$res"
fi
if has golden; then
  # PyTorch's CUDA float16 autocast on the golden GPT (tools/golden), for
  # nn's TestGPTAutocastFP16MatchesPyTorchGPU; the file comes back in $OUT.
  (cd tools/golden && python3 gpt_amp.py --dtype fp16 --device cuda -o ../../nn/testdata) > "$L/golden-fp16.txt" 2>&1
  say "golden fp16: exit $?"; tail -1 "$L/golden-fp16.txt"
  cp nn/testdata/golden_gpt_amp_fp16.safetensors "$OUT/" 2>/dev/null
  (cd nn && STRATA_REQUIRE_GPU=1 timeout 120 "$PWD/../.gpu/nn.test" -test.run 'Autocast' -test.v > "$L/test-nn-amp.log" 2>&1)
  say "nn autocast golden tests: exit $?"; grep -E -- '^(--- |ok|FAIL)|logits:' "$L/test-nn-amp.log" | head -8
fi

if has amp; then
  # Mixed precision and checkpointing (issue 9): strata, then PyTorch eager
  # in the same call. tf32 and fp32 for the ratio; fp16 with each checkpoint mode.
  runs=${AMP_RUNS:-gpt2:fp32:none gpt2:tf32:none gpt2:bf16:none gpt2:fp16:none gpt2:fp16:blocks gpt2:fp16:selective gpt2:bf16:blocks char:fp32:none char:fp16:none char:bf16:none}
  for run in $runs; do
    IFS=: read -r cfg prec ck <<< "$run"
    timeout 240 .gpu/train-gpt -config $cfg -device cuda -bench -steps 10 -precision $prec -checkpoint $ck >> "$res" 2> "$L/bench-$cfg-$prec-$ck.txt"
    say "train bench $cfg $prec checkpoint=$ck: exit $?"; grep -A2 '^| config' "$L/bench-$cfg-$prec-$ck.txt" | tail -1
  done
  if has profile; then
    STRATA_CUDA_PROFILE=1 timeout 200 .gpu/train-gpt -config gpt2 -device cuda -bench -steps 2 -bench-warmup 2 -precision fp16 > /dev/null 2> "$L/profile-gpt2-fp16.txt"
    say "profile gpt2 fp16: exit $?; GEMM share $(awk -F'|' '/^\| MatMul/ {gsub(/[ %]/, "", $5); s += $5} END {print s "%"}' "$L/profile-gpt2-fp16.txt")"
    grep -A30 'kernel profile' "$L/profile-gpt2-fp16.txt" | head -32
  fi
  if [ -f .gpu/torch_gpt.py ] && ! has notorch; then
    (cd .gpu && timeout 420 python3 ../bench/torch_rows.py --env AMP_TORCH gpt2:fp32:0:0 gpt2:fp16:0:0 gpt2:fp16:1:0 \
      gpt2:bf16:0:0 gpt2:bf16:1:0 gpt2:fp16:0:1 char:fp16:0:0 char:bf16:0:0) >> "$res" 2> "$L/torch-amp.txt"
    say "pytorch amp: exit $?"; tail -3 "$L/torch-amp.txt"
  fi
fi

if has fused; then
  # The fused attention (issue 11): its own GPU checks and benchmark
  # (bench/attention-gpu.sh, over the same binaries), then gpt2 with fused
  # attention in fp16 under each checkpoint mode, and PyTorch's SDPA and
  # checkpointing anchors in the same call.
  ln -sf strata-gpu.tar.xz .gpu/attn.tar.xz
  OUT=$L/attn timeout 420 bash bench/attention-gpu.sh > "$L/attention-gpu.txt" 2>&1
  say "attention-gpu.sh: exit $?"; cat "$L/attn/summary.txt" | tee -a "$OUT/summary.txt"
  cp "$L/attn/bench-attention.jsonl" "$L/attn/bench-attention.md" "$OUT/" 2>/dev/null; cat "$L/attn/train-gpt.jsonl" >> "$res" 2>/dev/null
  for ck in none blocks selective; do
    timeout 150 .gpu/train-gpt -config gpt2 -device cuda -bench -steps 10 -precision fp16 -attention fused -checkpoint $ck >> "$res" 2> "$L/bench-gpt2-fp16-fused-$ck.txt"
    say "train bench gpt2 fp16 fused checkpoint=$ck: exit $?"; grep -A2 '^| config' "$L/bench-gpt2-fp16-fused-$ck.txt" | tail -1
  done
  if [ -f .gpu/torch_gpt.py ] && ! has notorch && ! has notorchfused; then
    (cd .gpu && timeout 200 python3 ../bench/torch_rows.py gpt2:fp16:1:0 gpt2:fp16:1:1 gpt2:bf16:1:0) >> "$res" 2> "$L/torch-fused.txt"
    say "pytorch sdpa: exit $?"; grep -h '"sdpa": true' "$res" | tail -3 | tee -a "$OUT/summary.txt"
  fi
fi

if has converge; then
  # Convergence in each precision: the char shape on a real text (this
  # repository's Go and CUDA sources), 300 steps; then the default task
  # in bf16 and with checkpointing.
  cat $(find . -name '*.go' -o -name '*.cuh' | sort) > /tmp/strata-text.txt
  for prec in fp32 fp16 bf16; do
    timeout 200 .gpu/train-gpt -config char -device cuda -steps 300 -precision $prec -eval-every 0 -quiet -out "" -sample 0 \
      -data /tmp/strata-text.txt -loss-log "$L/char-$prec-300.jsonl" > "$L/char-$prec-300.log" 2>&1
    say "char 300 steps $prec: exit $?; $(python3 -c "import json,sys; l=[json.loads(x)['loss'] for x in open(sys.argv[1])]; print('last-20 mean %.4f' % (sum(l[-20:])/20))" "$L/char-$prec-300.jsonl")"
  done
  for extra in "-precision bf16" "-checkpoint blocks" "-precision fp16 -checkpoint selective"; do
    timeout 200 .gpu/train-gpt -quiet -eval-every 1000 -out "" $extra > "$L/default-$(echo $extra | tr ' ' '_').log" 2>&1
    say "default run $extra: exit $?; $(grep -E '^step' "$L/default-$(echo $extra | tr ' ' '_').log" | tail -1)"
  done
fi

tar czf "$OUT/logs.tgz" -C /tmp strata-logs
