set -u
T0=$(date +%s); nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
lscpu | grep -E 'Model name|MHz|L2|L3|Hypervisor|NUMA' | head -8
cd .gpu && tar xJf all.tar.xz && rm all.tar.xz && chmod +x * && cd ..
echo "untarred $(( $(date +%s)-T0 ))s"
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
if nvidia-smi -L | grep -q H200; then
  pair_process "as placed 1"
  pair_process "pinned 3" taskset -c 3
  pair_process "pinned 7" taskset -c 7
else
  pair_process "as placed (H100 host)"
fi
echo "pairs done at $(( $(date +%s)-T0 ))s"
for kw in 2 auto; do
  s=$(date +%s)
  timeout 150 .gpu/train-gpt -device cuda -config gpt2 -precision bf16 -bench -steps 10 -checkpoint auto -checkpoint-keep-wide $kw -device-budget 6GiB > $OUT/live-kw$kw.jsonl 2> $OUT/live-kw$kw.log
  echo "live keep-wide $kw rc $? $(( $(date +%s)-s ))s: $(tail -c 600 $OUT/live-kw$kw.jsonl)"
  grep -i -E "placement|checkpoint|error" $OUT/live-kw$kw.log | tail -5
done
s=$(date +%s); timeout 60 .gpu/train-gpt > $OUT/main.log 2>&1; echo "main job rc $? $(( $(date +%s)-s ))s"; tail -4 $OUT/main.log
SUITES="dist examples/train-gpt" OUT=$OUT timeout 300 bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"
cat $OUT/summary.txt; (cd /tmp/strata-hybrid-logs && tar cJf $OUT/logs.tar.xz *.log)
grep -h -E -- '--- FAIL|panic:' /tmp/strata-hybrid-logs/*.log | head -20
echo total $(( $(date +%s)-T0 ))s
