T0=$(date +%s); cd .gpu && tar xJf b1.tar.xz && rm b1.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
if nvidia-smi -L | grep -q H200; then pair_process "h200 1"; pair_process "h200 pinned" taskset -c 3; fi
A="-config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
live_bench gpt2-fp16-ckpt X=1 $A
live_bench gpt2-fp16-ckpt-plan0 STRATA_PLAN_STEPS=0 $A
live_bench char-fp16-ckpt X=1 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30
live_bench gpt2-fp32 X=1 -config gpt2 -precision fp32 -attention plain -cuda-graph off -bench-warmup 60 -steps 30
echo "t $(( $(date +%s)-T0 ))s"
replay_traces
echo "t $(( $(date +%s)-T0 ))s"
mkdir -p /tmp/strata-hybrid-logs
s=$(date +%s); timeout 120 .gpu/memstrategies -config gpt2 -precision bf16 -steps 5 -warmup 3 -strategies device,device-fused,hybrid -png $OUT/memstrategies-gpt2-bf16.png > $OUT/memstrategies-bf16.jsonl 2> /tmp/ms-bf16.log; echo "memstrategies bf16 rc $? $(( $(date +%s)-s ))s"
grep -E '^\||raised|spilled|placement:|still choosing' /tmp/ms-bf16.log | tail -30
s=$(date +%s); timeout 120 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup 3 -plan -strategies device,hybrid -png $OUT/memstrategies-gpt2-fp32.png > $OUT/memstrategies-fp32.jsonl 2> /tmp/ms-fp32.log; echo "memstrategies fp32 rc $? $(( $(date +%s)-s ))s"
grep -E '^\||raised|spilled|placement:|still choosing' /tmp/ms-fp32.log | tail -30
echo "t $(( $(date +%s)-T0 ))s"
nvidia-smi -L | grep -q H200 || { pair_process "h100 1"; pair_process "h100 pinned" taskset -c 3; }
SUITES="memory tensor autograd nn amp checkpoint examples/train-gpt" OUT=$OUT timeout $(( 530-($(date +%s)-T0) )) bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"
grep -E "^== test|test .*: exit|FAIL|panic" $OUT/summary.txt | head -30
grep -h -E -- '--- (PASS|FAIL|SKIP): TestGPUExpandableRefusesPastDevice' /tmp/strata-hybrid-logs/test-memory.log
cp /tmp/ms-*.log $OUT/ 2>/dev/null
echo total $(( $(date +%s)-T0 ))s
