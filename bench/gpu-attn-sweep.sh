#!/usr/bin/env bash
# The float32 attention's tiles and mma order, swept on the GPU: compiles
# kernels/all.cu once per variant (sm_90 only, in parallel; each variant
# is a set of -D for the ATTN_X3_* / ATTN_TF32_ASM macros of
# kernels/attention_mma3.cuh and attention_tf32.cuh), then times
# bench-attention's fp32 rows (three-TF32-product kernels, gpt2's shape)
# on each fatbin, alternating SWEEP_REPS times (default 2), and reports
# forward, forward+backward and the error against plain attention.
# The launcher reads each kernel's launch bound from the fatbin it loads
# (tensor's attentionKernels.readBlocks), so a variant may change warps.
#
#   SWEEP_VARIANTS  'name:-DA=1 -DB=2;name2:...' (default below)
#   SWEEP_TRAIN=1   then gpt2 fp32 train-gpt -bench on base and on the
#                   variant whose fused-qkv forward+backward was fastest
#                   (SWEEP_BEST names another), alternating, and the
#                   tensor GPU tests of attention on that variant
#
# Build here: make gpu. Run there: export OUT; bash bench/gpu-attn-sweep.sh
L=/tmp/strata-sweep-logs
default_phases="sweep"
. "$(dirname "$0")/gpu-common.sh"
kv2="-DATTN_X3_DKV_W=2 -DATTN_X3_DKV_RES=1 -DATTN_X3_DKV_MINB=6"
q2="-DATTN_X3_DQ_W=2 -DATTN_X3_DQ_RES=1 -DATTN_X3_DQ_BN=16 -DATTN_X3_DQ_MINB=6"
m4="-DATTN_X3_DKV_W=2 -DATTN_X3_DKV_RES=1 -DATTN_X3_DKV_MINB=4 -DATTN_X3_DQ_W=2 -DATTN_X3_DQ_RES=1 -DATTN_X3_DQ_BN=16 -DATTN_X3_DQ_MINB=4"
variants=${SWEEP_VARIANTS:-"base:;il:-DATTN_X3_INTERLEAVE=1;kv2:$kv2;q2:$q2;both:$kv2 $q2;bothil:$kv2 $q2 -DATTN_X3_INTERLEAVE=1;bothm4:$m4;bothnv:$kv2 $q2 -DATTN_TF32_ASM=asm"}
IFS=';' read -r -a vs <<< "$variants"
start=$(date +%s)
for v in "${vs[@]}"; do
  name=${v%%:*} flags=${v#*:}
  # shellcheck disable=SC2086
  (nvcc -std=c++17 -O3 -fatbin -gencode arch=compute_90,code=sm_90 $flags -o "$L/$name.fatbin" kernels/all.cu \
    > "$L/nvcc-$name.txt" 2>&1 || echo "nvcc failed" >> "$L/nvcc-$name.txt") &
done
wait
say "sweep: ${#vs[@]} variants compiled in $(( $(date +%s) - start ))s"
for v in "${vs[@]}"; do
  name=${v%%:*}
  grep -q "nvcc failed" "$L/nvcc-$name.txt" && { say "variant $name: nvcc failed"; tail -5 "$L/nvcc-$name.txt" | tee -a "$OUT/summary.txt"; }
done
for rep in $(seq "${SWEEP_REPS:-2}"); do
  for v in "${vs[@]}"; do
    name=${v%%:*}
    [ -f "$L/$name.fatbin" ] || continue
    STRATA_KERNELS=$L/$name.fatbin timeout 120 .gpu/bench-attention -device cuda -precision fp32 ${SWEEP_ATTN_ARGS:-} \
      > "$L/attn-$name-$rep.jsonl" 2> "$L/attn-$name-$rep.txt"
    rc=$?
    sed "s/^{/{\"variant\":\"$name\",\"rep\":$rep,/" "$L/attn-$name-$rep.jsonl" >> "$res"
    say "variant $name rep $rep (exit $rc): $(python3 - "$L/attn-$name-$rep.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["attention"] in ("fused", "fused-qkv"):
        print("%s fwd %.3f fwd+bwd %.3f err %.2g;" % (r["attention"], r["forward_ms"], r["forward_backward_ms"], r["max_rel_err_vs_plain"]), end=" ")
PY
)"
  done
done
best=${SWEEP_BEST:-$(python3 - "$res" <<'PY'
import json, sys, statistics
t = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("attention") == "fused-qkv" and "variant" in r:
        t.setdefault(r["variant"], []).append(r["forward_backward_ms"])
print(min(t, key=lambda v: statistics.median(t[v])) if t else "base")
PY
)}
say "fastest variant: $best"
if [ -n "${SWEEP_TRAIN:-}" ]; then
  (cd tensor && STRATA_KERNELS=$L/$best.fatbin STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/tensor.test -test.run 'Attention' -test.v > "$L/test-attention-$best.log" 2>&1)
  say "tensor attention tests on $best: exit $?; $(grep -c -- '--- PASS' "$L/test-attention-$best.log") passed, $(grep -c -- '--- FAIL' "$L/test-attention-$best.log") failed"
  grep -E -- '--- FAIL|panic:' "$L/test-attention-$best.log" | head -10 | tee -a "$OUT/summary.txt"
  for rep in 1 2; do
    for name in base $best; do
      STRATA_KERNELS=$L/$name.fatbin timeout 150 .gpu/train-gpt -device cuda -bench -config gpt2 -precision fp32 \
        >> "$res" 2> "$L/train-$name-$rep.txt"
      say "train-gpt gpt2 fp32 on $name rep $rep: exit $?; $(tail -1 "$res" | grep -o '"tok_s":[0-9.]*')"
    done
  done
fi
