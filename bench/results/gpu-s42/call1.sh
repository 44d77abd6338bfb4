T0=$(date +%s); cd .gpu && tar xJf b1.tar.xz && rm b1.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
left() { echo $(( 540-($(date +%s)-T0) )); }
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
if nvidia-smi -L | grep -q H200; then pair_process "h200 1"; pair_process "h200 2"; pair_process "h200 3"; pair_process "h200 pinned" taskset -c 3; fi
echo "t $(( $(date +%s)-T0 ))s"
A="-config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
C="-config char -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30"
live_bench gpt2-fp16-ckpt X=1 $A
live_bench char-fp16-ckpt X=1 $C
cp .gpu/train-gpt /tmp/train-gpt-base; cp .gpu/train-gpt-oneoff .gpu/train-gpt
live_bench gpt2-fp16-ckpt-oneoff X=1 $A
live_bench char-fp16-ckpt-oneoff X=1 $C
cp /tmp/train-gpt-base .gpu/train-gpt
echo "t $(( $(date +%s)-T0 ))s"
for n in gpt2 char; do
  [ $(left) -gt 70 ] || break
  s=$(date +%s); STRATA_STEPS_LOG=/tmp/$n.steps timeout 100 .gpu/train-gpt-log -device cuda -bench -config $n -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 60 -steps 30 > /tmp/log-$n.jsonl 2>/tmp/log-$n.err; echo "steps log $n rc $? $(( $(date +%s)-s ))s $(wc -l < /tmp/$n.steps) calls"; tail -1 /tmp/log-$n.jsonl | cut -c1-300
  xz -T4 -6 -c /tmp/$n.steps > $OUT/eager-$n-fp16-ckpt.steps.xz; cp /tmp/log-$n.jsonl $OUT/steps-log-$n.jsonl
done
echo "t $(( $(date +%s)-T0 ))s"
if [ $(left) -gt 60 ]; then replay_traces; fi
if [ $(left) -gt 40 ]; then
s=$(date +%s); timeout 40 .gpu/train-gpt -device cuda -config gpt2 -memory-step 3 -memory-trace $OUT/gpt2-step3.json -memory-plot $OUT/gpt2-step3.png > /tmp/mt.log 2>&1; echo "memory trace rc $? $(( $(date +%s)-s ))s"; tail -3 /tmp/mt.log
xz -T4 -6 $OUT/gpt2-step3.json
fi
echo "t $(( $(date +%s)-T0 ))s"
if [ $(left) -gt 60 ]; then
SUITES="memory autograd checkpoint nn" OUT=$OUT timeout $(left) bash bench/gpu-hybrid.sh suites24 > /tmp/suites.log 2>&1; echo "suites rc $? $(( $(date +%s)-T0 ))s"
grep -E "^== test|test .*: exit|FAIL|panic" $OUT/summary.txt | head -30
grep -h -E -- '--- FAIL' /tmp/strata-hybrid-logs/*.log | head
fi
cd $OUT && tar cJf results.tar.xz $(ls | grep -v -E '\.steps\.xz$|\.png$|^results') && ls | grep -v -E '\.steps\.xz$|\.png$|^results' | xargs rm -f; ls -la $OUT
echo total $(( $(date +%s)-T0 ))s
