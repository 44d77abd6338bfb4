T0=$(date +%s); cd .gpu && tar xJf b4.tar.xz && rm b4.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_KERNELS STRATA_PLAN_STEPS
(cd memory && STRATA_REQUIRE_GPU=1 timeout 90 ../.gpu/memory.test -test.v -test.run 'TestGPU|Plan|TestLowerBound' > /tmp/m.log 2>&1; echo "memory TestGPU*/Plan* rc $?: $(grep -c -- '--- PASS' /tmp/m.log) passed, $(grep -c -- '--- FAIL' /tmp/m.log) failed, $(grep -c -- '--- SKIP' /tmp/m.log) skipped"; grep -- '--- FAIL' /tmp/m.log | head)
run() { # name env flags...
  local n=$1 e=$2; shift 2
  s=$(date +%s); env $e timeout 120 .gpu/train-gpt -device cuda -bench "$@" > /tmp/bench-$n.jsonl 2> /tmp/bench-$n.log; echo "[$n] $e rc $? $(( $(date +%s)-s ))s"
  python3 -c "
import json
r=json.loads(open('/tmp/bench-$n.jsonl').read().strip().splitlines()[-1])
print(' '.join('%s=%s'%(k,r.get(k)) for k in ['tok_s','step_ms','peak_bytes','peak_reserved_bytes','pages_mapped_per_step','syncs_per_step']), 'ratio=%.4f'%(r['peak_reserved_bytes']/r['peak_bytes']))
" 2>&1 | tail -1
  cat /tmp/bench-$n.jsonl >> $OUT/bench.jsonl
}
A="-config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
B="-config gpt2 -precision fp32 -cuda-graph off -bench-warmup 60 -steps 30"
run gpt2-fp16-ckpt-default X=1 $A
run gpt2-fp16-ckpt-plan0 STRATA_PLAN_STEPS=0 $A
run gpt2-fp32-default X=1 $B
s=$(date +%s); timeout 120 .gpu/train-gpt > /tmp/main.log 2>&1; echo "main job rc $? $(( $(date +%s)-s ))s"; grep -E "^step  6000|held-out accuracy:" /tmp/main.log | tail -2 | cut -c1-200
timeout 60 .gpu/generate -weights gpt.safetensors -addition 2000 2>&1 | grep "held-out accuracy:"
echo total $(( $(date +%s)-T0 ))s
