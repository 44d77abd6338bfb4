set -u
T0=$(date +%s); nvidia-smi -L; echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
cd .gpu && tar xJf gate.tar.xz && rm gate.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
if nvidia-smi -L | grep -q H200; then
  lscpu | grep -E 'Model name|MHz|L2|L3' | head -5
  pair_process "as placed 1"
  pair_process "pinned 3" taskset -c 3
fi
A="-config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
C="-config char -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
B="-config gpt2 -precision bf16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
cp .gpu/tg-base .gpu/train-gpt; live_bench gpt2-base X=1 $A
cp .gpu/tg-rec .gpu/train-gpt; live_bench gpt2-new STRATA_STEPS_LOG=/tmp/gpt2.steps $A
cp .gpu/tg-base .gpu/train-gpt; live_bench char-base X=1 $C
cp .gpu/tg-rec .gpu/train-gpt; live_bench char-new STRATA_STEPS_LOG=/tmp/char.steps $C
cp .gpu/tg-base .gpu/train-gpt; live_bench gpt2bf-base X=1 $B
cp .gpu/tg-rec .gpu/train-gpt; live_bench gpt2bf-new STRATA_STEPS_LOG=/tmp/gpt2bf.steps $B
for n in gpt2 char gpt2bf; do gzip -c /tmp/$n.steps > "$OUT/live-$n-roles.steps.gz"; done
replay_traces
ls -la $OUT; echo "live done $(( $(date +%s)-T0 ))s"
SUITES="tensor dist memory" OUT=$OUT timeout 240 bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"
cat $OUT/summary.txt
grep -h -E -- '--- (FAIL)' /tmp/strata-hybrid-logs/test-*.log | head -12
grep -h -E -- '--- (PASS|SKIP)' /tmp/strata-hybrid-logs/test-*.log | grep -E 'PipelineTrace|SyncGradients' | head -12
(cd /tmp/strata-hybrid-logs && tar cJf $OUT/logs.tar.xz *.log)
echo total $(( $(date +%s)-T0 ))s
