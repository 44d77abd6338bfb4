#!/usr/bin/env bash
# Issue 10's GPU measurements in one device call, on a machine without Go:
# build here with `make gpu`, copy ../shared/anchors/torch_gpt.py into
# .gpu/, then run from the repository root there:
#
#   bash bench/gpu-hybrid.sh tests table medium torch
#
# coretests  the GPU tests of tensor, autograd and nn only
# tests   the GPU tests of the packages the hybrid placement touches
#         (memory: offload backend, spilling; autograd: the fused head;
#         nn, examples/memstrategies)
# table   examples/memstrategies on gpt2 (B8 T1024, AdamW): every strategy
#         in fp32 (TABLE_FP32_STRATEGIES), then in bf16 without the slow
#         zero-copy row (TABLE_BF16_STRATEGIES; none: no bf16 table)
# medium  gpt2-medium B8 T1024 bf16: the device strategy unconstrained,
#         then hybrid with block checkpointing under a 4 GiB device budget
# trainbudget  train-gpt itself on gpt2-medium with and without
#         -device-budget 4GiB: the same losses
# benchbudget  train-gpt -bench on gpt2-medium bf16 (fused head and
#         attention, BENCH_WARM warm-up steps, 10 timed): unconstrained
#         without checkpointing, then under -device-budget 4GiB with
#         -checkpoint auto (nn.Placement chooses the level) and with
#         -checkpoint blocks, with and without -overlap-optimizer:
#         steady-state tokens/s, timed spills (BENCH_CONFIGS: other
#         ';'-separated flag sets, each optionally led by VAR=value)
# pipetests  the GPU tests of the pipelined optimizer update only
#         (tensor's TestAdamWStepsPipelined, nn's TestAdamWPipelineSameBits,
#         with the overlapped update's beside them): bits against the plain
#         update
# pipelineab  train-gpt -bench gpt2-medium bf16 (fused head and attention,
#         BENCH_WARM warm-up steps, 10 timed) unconstrained once, then
#         under -device-budget 4GiB -checkpoint auto with the optimizer
#         update plain, pipelined (-pipeline-optimizer, a launch a layer)
#         and pipelined in launches of at most PIPE_WIDTH blocks (default
#         66, half the H200's SMs, so that the forward pass beside it keeps
#         SMs), alternating, PIPE_RUNS rounds (default 2), then each
#         ';'-separated flag set of PIPE_EXTRA once, each optionally led by
#         VAR=value (e.g. "STRATA_EXPANDABLE_SEGMENTS=1 -pipeline-optimizer
#         -pipeline-width 66": expandable segments kept 0.5 GiB more state
#         on the device in session 11): tokens/s, the ratio to the
#         unconstrained run, step ms, phases, timed spills, peaks by tier
#         (seven runs of 8-25 s with the defaults)
# overlapab  memstrategies' hybrid on gpt2-medium under 4 GiB with the
#         optimizer update overlapped and not, alternating, twice
# fp32attn  train-gpt -bench gpt2 fp32 (TF32 off) with plain and fused
#         attention, alternating, twice (FUSED_RUNS): is the float32
#         FlashAttention-2 kernel the faster default in training?
# batchscale  train-gpt -bench gpt2 bf16 at batch 8, 16 and 8 again: a
#         step's cost that does not grow with the batch (host gaps)
# link    examples/bench-link: the bus by copy engine (pinned and unified
#         host memory, each direction and both at once)
# linkab  memstrategies hybrid gpt2-medium bf16 under 4 GiB with the
#         embedded kernels and with FRESH_KERNELS' fatbin, alternating:
#         the offloaded optimizer update's time and bus bandwidth
# hostab  train-gpt -bench gpt2 bf16 with GOGC default, off and 400,
#         alternating, and with every step's gradients clipped
# offload  checkpoint offload (activations in pinned host memory between
#         the passes, tensor.MoveTo's copy stream): its GPU tests (tensor's
#         TestMoveTo, train-gpt's TestCheckpointOffloadSameLosses), then
#         train-gpt -bench gpt2 fp32 (TF32 off) with no checkpointing (the
#         device row), -checkpoint selective, and -checkpoint selective
#         -checkpoint-offload, alternating OFFLOAD_RUNS rounds (default 2);
#         then memstrategies gpt2 fp32 device,hybrid (the seed table's
#         rows; the hybrid's checkpointing levels now include the
#         offloaded ones) and gpt2-medium bf16 under 4 GiB with -checkpoint
#         auto and with -checkpoint blocks -checkpoint-offload
# offload2  where the offloaded levels lose under a budget: memstrategies
#         gpt2 fp32 device,hybrid,hybrid-ckpt (selective, offloaded) with
#         -plan; train-gpt gpt2 fp32 selective offloaded and auto under the
#         hybrid row's budget (OFFLOAD_BUDGET, default 5.29GiB) with
#         -placement-plan; gpt2-medium bf16 under 4 GiB with -checkpoint
#         blocks, with and without -checkpoint-offload, classic and
#         expandable segments, -placement-plan (the target against the
#         budget)
# offload3  offload2's fp32 rows again after the pool's waits at its limit
#         became incremental (memory.Pool.waitFor), the budgeted run with a
#         Go CPU profile ($OUT/sel-off-budget.prof); memstrategies gpt2
#         fp32 device,hybrid,hybrid-ckpt; gpt2-medium bf16 under 4 GiB with
#         -checkpoint auto, classic and expandable segments, and pipelined
#         with expandable segments
# offload4  the GPU tests of memory, tensor and checkpoint (the pool's
#         incremental waits, the copy stream's own segments for moved
#         blocks) and train-gpt's offload test; train-gpt gpt2 fp32
#         selective offloaded without and with OFFLOAD_BUDGET; memstrategies
#         gpt2 fp32 device,hybrid,hybrid-ckpt (selective, offloaded, under
#         half the device's peak) and hybrid-ckpt alone without a budget;
#         gpt2-medium bf16 under 4 GiB with -checkpoint auto (the
#         offload-free levels; the first step at a level not judged)
# offload5  the GPU tests of memory and tensor (device-side waits for
#         pending blocks at the pool's limit, Pool.reclaimOnStream); train-gpt
#         gpt2 fp32 selective offloaded under OFFLOAD_BUDGET; memstrategies
#         gpt2 fp32 device,hybrid-ckpt (selective, offloaded, under half the
#         device's peak)
# offload6  expandable segments (STRATA_EXPANDABLE_SEGMENTS=1) with the
#         final pool: train-gpt gpt2 fp32 selective offloaded under
#         OFFLOAD_BUDGET; memstrategies gpt2 fp32 device,hybrid,hybrid-ckpt
#         (selective, offloaded, under half the device's peak)
# keep    -checkpoint-offload-keep 2..6 under the fp32 budget (classic and
#         expandable; auto: nn.Placement chooses), a memory plot, the seed
#         table's hybrid-ckpt rows at keeps KEEP_TABLE, gpt2-medium bf16 unconstrained and under 4 GiB
#         with expandable segments
# movetests the memory suite, the moves' GPU tests (classic, expandable)
# keepauto the timed keep search, classic and expandable
# plantrace session 18: the memory suite (classic, expandable) and the
#         traces replayed over device memory with and without step plans
# verify20 session 20: train-gpt's TestCheckpointOffloadSameLosses on
#         the GPU with STRATA_MOVE_VERIFY=1 (every move checked: bytes
#         before and after it, bytes kept while waiting in a tier, bytes
#         on the device until released) and STRATA_MEMORY_POISON=1, with
#         classic segments (the control) and expandable ones
#         (STRATA_EXPANDABLE_MOVES=1), as is and with CUDA_LAUNCH_BLOCKING=1
# bisect20 session 20: expandable with STRATA_MEMORY_GUARD=1: the tensor
#         and autograd GPU suites, then train-gpt's offload test under
#         LEND=0, CUDA_LAUNCH_BLOCKING=1, STRATA_VMM_COPY_ENGINE=1
# poison20 session 20: released bytes poisoned by the fill kernel
#         (STRATA_MEMORY_GUARD=poison-kernel) against the memset
# knobs20 session 20: plain expandable runs under GOGC=off, GOMAXPROCS=1,
#         STRATA_MEMORY_CHECK=1, GOGC=1: which makes the first loss right
# offbf21 session 21: gpt2-medium bf16 under 4 GiB (blocks, expandable)
#         with bf16 gradients and -checkpoint-offload together (both of
#         the step's peaks lowered), against each alone and unconstrained
# final21 session 21's last call: GPU suites of tensor, autograd and nn
#         (classic segments), and gpt2-medium bf16 under 4 GiB (blocks,
#         expandable) step 30's memory timeline with float32 and with
#         bf16 gradients (where the step's peak is now)
# loss21  session 21: gpt2-medium bf16 trained 60 steps on text (the
#         repository's Markdown, GPT-2 tokens): unconstrained, and under
#         4 GiB (blocks, expandable) with float32 and with bf16 gradients;
#         the loss curves side by side
# grid22  session 22 (run with FRESH_KERNELS=1: adamw_multi's rows are
#         grid-strided): the GPU suites of cuda, tensor, autograd and nn
#         and train-gpt's pipelined-update test on the fresh kernels; then
#         gpt2-medium bf16 under 4 GiB (blocks, expandable): session 21's
#         program (.gpu/train-gpt-old, its embedded kernels) plain and
#         pipelined, this one plain and pipelined at widths 66 (the
#         default), 16, 33, 132 and every row, and with -budget-margin
#         0.02; unconstrained before and after
# half22  session 22 (FRESH_KERNELS=1: AdamW and the sum of squares read
#         bf16 gradients): tensor's suite, tensor's, nn's and train-gpt's
#         half-gradient and pipelined-update tests on the GPU; then
#         gpt2-medium bf16 under 4 GiB (blocks, expandable): the pipelined
#         update with float32 and bf16 gradients (-grad-dtype bf16), the
#         plain update with bf16 gradients, 10 and 40 timed steps, against
#         the unconstrained run (10 and 40 steps) of this call
# fix22   session 22, after the touch fix: tensor's GPU suite on the
#         embedded kernels, then half22's gpt2-medium runs (pipelined and
#         plain, float32 and bf16 gradients, 10 and 40 timed steps) against
#         the unconstrained run of this call
# sweep22 session 22's last call: the pipelined update under 4 GiB with
#         the placement's margin at 0.03 and 0.04 of the budget and the
#         side grid at 24 and 40 blocks, 10 timed steps, and margin 0.04
#         at 40, against the unconstrained run (10 and 40 steps)
# bal22   session 22: the side grid balanced over a group's rows
#         (balancedGrid): the pipelined update under 4 GiB, 10 and 40
#         timed steps, against the unconstrained run
# ck23    session 23: block inputs offloaded beside the pipelined update
#         (-checkpoint-offload moved by a few blocks of the copy kernel on
#         the copy stream at the greatest priority), with float32 and bf16
#         gradients and keeps 0, auto and 4; the offload tier over pinned
#         memory (STRATA_OFFLOAD_MEMORY=pinned); against the unconstrained
#         run; tensor's move and half-gradient tests and memory's offload
#         test on the GPU first
# tl23    session 23: the pipelined update's timeline
#         (STRATA_PIPELINE_TRACE=1: each group's launch on the side stream,
#         its bytes over the bus, where the forward pass waits for it, the
#         forward and backward marks) under 4 GiB, float32 and bf16
#         gradients, 10 and 40 timed steps; tensor's TestGPUPipelineTrace
# ring23  session 23: the pipelined update's copy ring
#         (STRATA_PIPELINE_RING=1): tensor's TestGPUPipelineRing (classic
#         and expandable), then gpt2-medium under 4 GiB, pipelined, with and
#         without the ring, the offload tier pinned and managed, traced
#         (STRATA_PIPELINE_TRACE=1), 10 and 40 timed steps
# frag24  session 24: the graph capture's cache given back (tensor's capture
#         tests), train-gpt -bench's peak reserved / peak allocated on
#         torch_frag.py's configs and the bf16 rows, this tree's program
#         (.gpu/train-gpt) against the one before (.gpu/train-gpt-base),
#         then PyTorch traces of more configs (bench/torch_traces.py
#         traces, into $OUT/traces)
# main24  session 24: the main job (train-gpt with no flags) on the GPU with
#         the new defaults, then train-gpt -bench without a graph
#         (-cuda-graph off) on expandable and classic memory, and
#         train-gpt's fault test alone
# suites24 session 24: the GPU tests of memory, tensor, autograd, nn, amp,
#         checkpoint, dist and train-gpt (SUITES: another list) with
#         expandable device memory the default (STRATA_EXPANDABLE_SEGMENTS
#         unset; SEGMENTS=0 sets it to 0: classic segments)
# exp24   session 24: CUDA graphs on expandable device memory (the private
#         pool grows without synchronising): tensor's capture tests and
#         train-gpt's graph losses test with STRATA_EXPANDABLE_SEGMENTS=1
#         and 0, then train-gpt -bench on frag24's configs, expandable
#         against classic, peak reserved / peak allocated
# live24  PyTorch's live peak reserved / peak allocated on the same configs
#         (bench/torch_traces.py live)
# val24   session 24's first call: session 23's mends on the GPU (tensor's
#         ring, ring-steps, trace, pipelined and move tests on classic and
#         expandable memory; memory's CUDA manager, hold and spill tests),
#         then gpt2-medium bf16 under 4 GiB pipelined against unconstrained
# fin23   session 23's last call: the GPU tests of memory, tensor and nn
#         with the new defaults (the offload tier pinned, the copy ring on),
#         the ring's test on expandable memory, then gpt2-medium under 4 GiB
#         pipelined (default, ring off, bf16 gradients), plain, 10 and 40
#         timed steps, against the unconstrained run
# medium21 session 21: gpt2-medium bf16 under 4 GiB on expandable memory
#         (right since session 21): the bf16-gradient tests on the GPU;
#         blocks, selective and auto with bf16 gradients (-grad-dtype
#         bf16) and without, blocks with the pipelined update;
#         unconstrained twice and with bf16 gradients
# check21 session 21: fix20, then (when train-gpt's offload test is exact
#         on expandable memory) gpt2-medium bf16 under 4 GiB with blocks
#         checkpointed on expandable (twice) and classic segments, and
#         unconstrained, for issue 10's ratio
# fix20   for the session after 20: the upload-ordering fix on expandable
#         memory (ordering test, poisoned suites, train-gpt offload test)
# final20 session 20's last call: GPU suites (classic), memory on
#         expandable, the expandable refusal, train-gpt's offload test
# sync20 session 20: expandable (STRATA_EXPANDABLE_UNSAFE=1) with a
#         synchronisation before each map and unmap, or without stealing
# guard20 session 20: that test with STRATA_MEMORY_GUARD=1 (guard bytes
#         after every tensor, released bytes poisoned), classic and
#         expandable
# expmoves session 19: why bf16 training with offloaded activations gave
#         other losses with expandable segments (session 17): train-gpt's
#         TestCheckpointOffloadSameLosses on the GPU with
#         STRATA_EXPANDABLE_SEGMENTS=1 STRATA_EXPANDABLE_MOVES=1 (MoveTo
#         allowed there), as is, with CUDA_LAUNCH_BLOCKING=1 (every launch
#         and copy synchronous: passing then means an ordering bug), with
#         STRATA_EXPANDABLE_LEND=0 (no page lending), and both; then
#         gpt2-medium bf16 under 4 GiB, expandable, blocks, with and
#         without -checkpoint-offload (its speed there)
# capture19 session 19: gpt2-medium bf16 under 4 GiB (blocks,
#         expandable), step 30's memory timeline and segment map (and the
#         program before the session's changes, .gpu/train-gpt-base.xz,
#         when it is there)
# final19 session 19's last call: GPU suites of tensor, autograd, nn,
#         checkpoint and memory; the checkpoint offload test; gpt2-medium
#         bf16 under 4 GiB (expandable, blocks) twice and unconstrained
# pair25  session 25: the pairs of the classic pool, the expandable pool
#         (the device's default) and the manager: .gpu/mb (a mutex's
#         Lock+Unlock and an atomic add on this host, when there), memory's
#         TestPairWindows over host memory, classic and expandable, then
#         bench-alloc -reps 5 before the session's pool change
#         (.gpu/bench-alloc-base, when there) and after, alternating,
#         PAIR_ROUNDS rounds (default 2); then memory's GPU tests
# eager25 session 25: eager steps (-cuda-graph off) on expandable and
#         classic device memory: char bf16 and gpt2 bf16 (fused), exp1/exp0
#         alternating EAGER_ROUNDS rounds (default 2), then once each with
#         STRATA_CUDA_PROFILE=1 (every launch synchronised and timed: the
#         ops whose time differs), the profiles into $OUT/eager25-prof-*.txt
# long25  session 25: long eager runs (-cuda-graph off, LONG_STEPS: char
#         2000, LONG_STEPS_GPT2: gpt2 400; LONG_CFGS: some of them) on
#         expandable and classic device memory: the peak
#         reserved / peak allocated of a run of many windows of the churn
#         slack (memory's pool_expand_churn.go), the driver calls a step
# s26     session 26: the pools' one-atomic mutex (memory/mutex.go)
#         against sync.Mutex: the host's CPU, memory's TestPairWindows
#         (.gpu/memory.test, and .gpu/memory-base.test when there) classic
#         and expandable, then bench-alloc-base and bench-alloc -reps 5
#         alternating, PAIR_ROUNDS rounds (default 3), memory's GPU tests,
#         and (with .gpu/train-gpt) gpt2 fp16 checkpointed eager steps once
#         the churn slack settled (-bench-warmup 120 -steps 100; session
#         25's call 8), expandable and classic
# s26b    session 26: the same A/B pinned (taskset) to each of PIN_CORES
#         (default "3 4"), memory-base and memory alternating, PIN_ROUNDS
#         rounds (default 3), classic and expandable TestPairWindows, and
#         memory's BenchmarkMutex (uncontended, and contended from 2 and 4
#         goroutines) on the host
# med30   session 30: the README's gpt2-medium row, train-gpt -bench bf16
#         (fused head and attention, 25 warm-up steps, 10 timed)
#         unconstrained, then under -device-budget 4GiB with -checkpoint
#         blocks -pipeline-optimizer on the default (expandable) memory, then
#         unconstrained again: the ratio against the mean of the two
# fin30   session 30's last call: every trace of bench/traces replayed by
#         bench-alloc over device memory and over host memory (-device
#         cpu) on the same host, classic and expandable (-reps 3), then
#         the pairs without CUDA in the process (-device cpu) and with it,
#         alternating, PAIR_ROUNDS rounds (default 1), -reps 9: does the
#         CUDA context or the driver allocators' runs slow the pool's pair?
# ce31    session 31 (run with FRESH_KERNELS=1 after suites24): the
#         conformance case of the cross-entropy and log-softmax kernels on
#         logits up to 3e38 and Relu's at NaN (tensor's TestCrossEntropyExtremeLogits
#         and TestReluBackwardAtNaN, from the suite's log), then the README's main job (train-gpt, no flags)
# pair    bench-alloc's pairs against cuMemAllocAsync: a process as placed,
#         twice, then one pinned to each of PAIR_CORES (default 3)
# wide    session 18: gpt2 fp32 selective on the device keeping the MLP's
#         wide product in the last N blocks (fixed and chosen), the
#         references, the seed table's rows
# nsys    Nsight Systems over train-gpt -bench rows (NSYS_ROWS): the last
#         step's streams, copies, compute-stream gaps and host API calls
#         (bench/nsys_step.py)
# target  session 18: gpt2-medium bf16 under 4 GiB (classic, expandable,
#         pipelined, offloaded inputs, auto), gpt2 fp32's references and
#         offloaded keeps, the seed table's hybrid-ckpt row (keep auto)
# keepab  the keeps (KEEPS) twice, no checkpointing and selective on the
#         device as references, the placement's choice, table rows
# torch   PyTorch 2.x in the same call: gpt2-medium capped at 4 GiB
#         (set_per_process_memory_fraction; fp16 and fp32, checkpointed,
#         with and without expandable segments) and unconstrained, and
#         gpt2 fp32 eager, as ../shared/anchors/torch_frag.py does
#
# Sessions 17-20 trained on expandable device memory
# (STRATA_EXPANDABLE_SEGMENTS=1) with wrong results on the H200 (uploads by
# the copy engines into mapped ranges); session 21 fixed it (tensor's
# cuda_stage.go) and lifted session 20's refusal: the losses of the older
# phases that trained on it (expmoves, capture19, final19, target, ...) are
# not to be trusted.
# Results go to $OUT (default /tmp/strata-gpu): summary.txt, results.jsonl
# (every JSON line), the bar charts (*.png) and logs.tgz (the device tool
# brings back 8 files at most).
L=/tmp/strata-hybrid-logs
default_phases="tests table medium torch"
phases="$*"
. "$(dirname "$0")/gpu-common.sh"

# offload_test LOG VAR=value...: train-gpt's TestCheckpointOffloadSameLosses
# on the GPU with its moves and expandable device memory allowed (for
# diagnosis: STRATA_EXPANDABLE_MOVES, STRATA_EXPANDABLE_UNSAFE) and the
# given environment, its output into LOG; the test's exit status.
offload_test() {
  local log=$1; shift
  (cd examples/train-gpt && env STRATA_EXPANDABLE_UNSAFE=1 STRATA_EXPANDABLE_MOVES=1 STRATA_REQUIRE_GPU=1 "$@" timeout 200 ../../.gpu/train-gpt.test \
    -test.run 'TestCheckpointOffloadSameLosses/cuda' -test.v -test.timeout 190s > "$log" 2>&1)
}

if has coretests; then
  run_gpu_tests tensor autograd nn
  grep -h -E -- '--- (PASS|FAIL): (TestAdamWStepsOverlapped|TestAdamWOverlapSameBits)' "$L"/test-*.log | tee -a "$OUT/summary.txt"
fi

if has tests; then
  run_gpu_tests cuda memory tensor autograd amp checkpoint nn examples/memstrategies
  grep -h -E -- '--- (PASS|FAIL): (TestGPU(SpillToOffload|LinearCrossEntropy|BackendConformance/offload)|TestAdamWStepsOverlapped|TestAdamWOverlapSameBits)' "$L"/test-*.log | tee -a "$OUT/summary.txt"
  grep -h -A12 -- '--- FAIL: TestGPULinearCrossEntropy' "$L"/test-autograd.log | head -30 | tee -a "$OUT/summary.txt"
fi

if has table; then
  start=$(date +%s)
  timeout 300 .gpu/memstrategies -config gpt2 -precision fp32 -steps "${TABLE_STEPS:-5}" -warmup 3 -plan \
    -strategies "${TABLE_FP32_STRATEGIES:-device,device-fused,managed,role,hybrid,hybrid-ckpt,zerocopy}" \
    -png "$OUT/memstrategies-gpt2-fp32.png" >> "$res" 2> "$L/memstrategies-fp32.log"
  say "memstrategies gpt2 fp32: exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\||raised|spilled|placement:|still choosing' "$L/memstrategies-fp32.log" | tee -a "$OUT/summary.txt"
  if [ "${TABLE_BF16_STRATEGIES:-}" != none ]; then
  start=$(date +%s)
  timeout 240 .gpu/memstrategies -config gpt2 -precision bf16 -steps "${TABLE_STEPS:-5}" -warmup 3 \
    -strategies "${TABLE_BF16_STRATEGIES:-device,device-fused,managed,role,hybrid,hybrid-ckpt}" \
    -png "$OUT/memstrategies-gpt2-bf16.png" >> "$res" 2> "$L/memstrategies-bf16.log"
  say "memstrategies gpt2 bf16: exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\||raised|spilled|placement:|still choosing' "$L/memstrategies-bf16.log" | tee -a "$OUT/summary.txt"
  fi
fi

if has medium; then
  start=$(date +%s)
  timeout 240 .gpu/memstrategies -config gpt2-medium -precision bf16 -steps 4 -warmup 3 -plan \
    -strategies device,hybrid -attention fused -budget 4GiB \
    -png "$OUT/memstrategies-medium-bf16.png" >> "$res" 2> "$L/memstrategies-medium.log"
  say "memstrategies gpt2-medium bf16 under 4 GiB: exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\||spilled|placement plan|raised|placement:|still choosing' "$L/memstrategies-medium.log" | tee -a "$OUT/summary.txt"
  # Loss falling under the budget: 40 steps of the hybrid strategy.
  start=$(date +%s)
  timeout 200 .gpu/memstrategies -config gpt2-medium -precision bf16 -steps 30 -warmup 10 -png "" \
    -strategies hybrid -attention fused -budget 4GiB -plan-every > "$L/medium-40.jsonl" 2> "$L/medium-40.log"
  say "gpt2-medium 40 steps under 4 GiB: exit $? in $(( $(date +%s) - start ))s"
  cat "$L/medium-40.jsonl" >> "$res"; cut -c1-600 "$L/medium-40.jsonl" | tee -a "$OUT/summary.txt"
fi

if has pipetests; then
  for t in "tensor TestAdamWStepsPipelined|TestAdamWStepsOverlapped" "nn TestAdamWPipelineSameBits|TestAdamWOverlapSameBits|TestPipelineGroups"; do
    pkg=${t%% *} pat=${t#* }
    start=$(date +%s)
    bin=$PWD/.gpu/$pkg.test
    (cd "$pkg" && STRATA_REQUIRE_GPU=1 timeout 90 "$bin" -test.v -test.run "^($pat)\$" > "$L/pipetest-$pkg.log" 2>&1)
    say "pipeline tests of $pkg: exit $? in $(( $(date +%s) - start ))s"
    grep -E -- '--- (PASS|FAIL|SKIP)|panic:' "$L/pipetest-$pkg.log" | tee -a "$OUT/summary.txt"
  done
fi

if has pipelineab; then
  # The pipelined optimizer update against the plain one under the 4 GiB
  # budget, alternating; each run's tokens/s against the unconstrained
  # run of this call.
  pipe_run() { # name, then train-gpt flags, each optionally led by VAR=value
    local name=$1; shift
    local envs=() flags=() w start
    for w in "$@"; do
      case $w in *=*) if [ ${#flags[@]} -eq 0 ]; then envs+=("$w"); else flags+=("$w"); fi ;; *) flags+=("$w") ;; esac
    done
    start=$(date +%s)
    env ${envs[@]+"${envs[@]}"} timeout 60 .gpu/train-gpt -device cuda -config gpt2-medium -precision bf16 -attention fused -head fused -bench -steps 10 \
      -bench-warmup "${BENCH_WARM:-25}" ${flags[@]+"${flags[@]}"} > "$L/pipe-$name.jsonl" 2> "$L/pipe-$name.log"
    say "[$name] train-gpt -bench gpt2-medium bf16 $*: exit $? in $(( $(date +%s) - start ))s; $(jfields "$L/pipe-$name.jsonl" tok_s step_ms checkpoint timed_spills optimizer_pipelined pipeline_width peak_mib_by_tier phases)"
    grep -E '^placement:|still choosing' "$L/pipe-$name.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
    cat "$L/pipe-$name.jsonl" >> "$res"
  }
  pipe_run unconstrained -checkpoint none
  for i in $(seq "${PIPE_RUNS:-2}"); do
    pipe_run "plain-$i" -checkpoint auto -device-budget 4GiB
    pipe_run "pipelined-$i" -checkpoint auto -device-budget 4GiB -pipeline-optimizer
    pipe_run "pipelined-w${PIPE_WIDTH:-66}-$i" -checkpoint auto -device-budget 4GiB -pipeline-optimizer -pipeline-width "${PIPE_WIDTH:-66}"
  done
  IFS=';' read -r -a extra <<< "${PIPE_EXTRA:-}"
  n=0
  for args in ${extra[@]+"${extra[@]}"}; do
    n=$((n + 1))
    pipe_run "extra-$n" $args -checkpoint auto -device-budget 4GiB
  done
  python3 - "$L" <<'PY' | tee -a "$OUT/summary.txt"
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "pipe-*.jsonl"))):
    try:
        rows[os.path.basename(f)[5:-6]] = json.loads(open(f).read().strip().splitlines()[-1])["tok_s"]
    except Exception:
        pass
base = rows.get("unconstrained")
for name, tok in sorted(rows.items()):
    ratio = " (%.3fx of unconstrained)" % (tok / base) if base else ""
    print("pipelineab %-16s %9.0f tokens/s%s" % (name, tok, ratio))
PY
fi

# offload_tests [VAR=value...]: the GPU tests of the moves (tensor's
# TestMoveTo, train-gpt's bit-identical losses with -checkpoint-offload).
offload_tests() {
  local t pkg pat start bin tag=${1:+-exp}
  for t in "tensor TestMoveTo" "examples/train-gpt TestCheckpointOffloadSameLosses"; do
    pkg=${t%% *} pat=${t#* }
    start=$(date +%s)
    bin=$PWD/.gpu/$(basename "$pkg").test
    (cd "$pkg" && env "$@" STRATA_REQUIRE_GPU=1 timeout 150 "$bin" -test.v -test.run "^($pat)\$" > "$L/offtest$tag-$(basename "$pkg").log" 2>&1)
    say "offload tests of $pkg $*: exit $? in $(( $(date +%s) - start ))s"
    grep -E -- '--- (PASS|FAIL|SKIP)|panic:|worst relative' "$L/offtest$tag-$(basename "$pkg").log" | tee -a "$OUT/summary.txt"
  done
}

if has movetests; then
  run_gpu_tests memory
  offload_tests
  offload_tests STRATA_EXPANDABLE_SEGMENTS=1
fi

if has offload; then
  offload_tests
  off_run() { # name, then train-gpt flags
    local name=$1 start; shift
    start=$(date +%s)
    timeout 90 .gpu/train-gpt -device cuda "$@" -bench -steps 10 -bench-warmup "${BENCH_WARM:-4}" > "$L/off-$name.jsonl" 2> "$L/off-$name.log"
    say "[$name] train-gpt -bench $*: exit $? in $(( $(date +%s) - start ))s; $(jfields "$L/off-$name.jsonl" tok_s step_ms checkpoint peak_mib_by_tier phases)"
    cat "$L/off-$name.jsonl" >> "$res"
  }
  for i in $(seq "${OFFLOAD_RUNS:-2}"); do
    off_run "fp32-none-$i" -config gpt2 -precision fp32
    off_run "fp32-selective-$i" -config gpt2 -precision fp32 -checkpoint selective -cuda-graph off
    off_run "fp32-selective-offload-$i" -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload
  done
  start=$(date +%s)
  timeout 240 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup 3 -plan -strategies device,hybrid \
    -png "$OUT/memstrategies-gpt2-fp32-offload.png" >> "$res" 2> "$L/memstrategies-offload-fp32.log"
  say "memstrategies gpt2 fp32 device,hybrid: exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\||raised|spilled|placement:|still choosing' "$L/memstrategies-offload-fp32.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
  for args in "-checkpoint none" "-checkpoint auto -device-budget 4GiB" "-checkpoint blocks -checkpoint-offload -device-budget 4GiB"; do
    name=medium-$(echo "$args" | tr -c 'a-z0-9' '-' | tr -s '-')
    start=$(date +%s)
    timeout 90 .gpu/train-gpt -device cuda -config gpt2-medium -precision bf16 -attention fused -head fused -bench -steps 10 \
      -bench-warmup "${BENCH_WARM_MEDIUM:-45}" $args > "$L/off-$name.jsonl" 2> "$L/off-$name.log"
    say "[$name] train-gpt -bench gpt2-medium bf16 $args: exit $? in $(( $(date +%s) - start ))s; $(jfields "$L/off-$name.jsonl" tok_s step_ms checkpoint timed_spills peak_mib_by_tier phases)"
    grep -E '^placement:|still choosing' "$L/off-$name.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
    cat "$L/off-$name.jsonl" >> "$res"
  done
fi

off2() { # name, then flags (each optionally led by VAR=value); TG: another program of .gpu
  local name=$1 envs=() flags=() w start; shift
  for w in "$@"; do
    case $w in *=*) if [ ${#flags[@]} -eq 0 ]; then envs+=("$w"); else flags+=("$w"); fi ;; *) flags+=("$w") ;; esac
  done
  start=$(date +%s)
  # -placement-plan prints the plan under a budget; without one it is refused.
  case " ${flags[*]-} " in *" -device-budget "*) flags+=(-placement-plan) ;; esac
  env ${envs[@]+"${envs[@]}"} timeout 100 .gpu/${TG:-train-gpt} -device cuda -bench -steps 10 ${flags[@]+"${flags[@]}"} > "$L/off2-$name.jsonl" 2> "$L/off2-$name.log"
  say "[$name] train-gpt -bench $*: exit $? in $(( $(date +%s) - start ))s; $(jfields "$L/off2-$name.jsonl" tok_s step_ms checkpoint timed_spills peak_mib_by_tier phases)"
  grep -E '^placement:|placement plan after|still choosing' "$L/off2-$name.log" | cut -c1-200 | tail -8 | tee -a "$OUT/summary.txt"
  cat "$L/off2-$name.jsonl" >> "$res"
}

# off2_variant PREFIX BASE NAME EXTRA: off2 PREFIX-NAME with EXTRA's
# STRATA_* settings ahead of BASE (off2 takes VAR=value words before the
# first flag) and its flags after it; prints the copy ring's state.
off2_variant() {
  local prefix=$1 base=$2 name=$3 envs="" flags="" w
  for w in $4; do case $w in STRATA_*) envs="$envs $w" ;; *) flags="$flags $w" ;; esac; done
  # shellcheck disable=SC2086 # words on purpose
  off2 "$prefix-$name" $envs $base $flags
  grep -E "copy ring" "$L/off2-$prefix-$name.log" | tee -a "$OUT/summary.txt"
}

if has offload2; then
  start=$(date +%s)
  timeout 240 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup 3 -plan -strategies device,hybrid,hybrid-ckpt \
    -hybrid-checkpoint selective -hybrid-offload -png "$OUT/memstrategies-gpt2-fp32-offload2.png" >> "$res" 2> "$L/memstrategies-offload2-fp32.log"
  say "memstrategies gpt2 fp32 device,hybrid,hybrid-ckpt(selective, offloaded): exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\||raised|placement:|placement plan|still choosing' "$L/memstrategies-offload2-fp32.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
  b=${OFFLOAD_BUDGET:-5.29GiB}
  off2 fp32-sel-off-budget -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -device-budget "$b" -bench-warmup 8
  off2 fp32-auto-budget -config gpt2 -precision fp32 -checkpoint auto -device-budget "$b" -bench-warmup 46
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -device-budget 4GiB -bench-warmup 25"
  off2 medium-blocks $m -checkpoint blocks
  off2 medium-blocks-off $m -checkpoint blocks -checkpoint-offload
  off2 medium-blocks-exp STRATA_EXPANDABLE_SEGMENTS=1 $m -checkpoint blocks
  off2 medium-blocks-off-exp STRATA_EXPANDABLE_SEGMENTS=1 $m -checkpoint blocks -checkpoint-offload
fi

if has offload3; then
  b=${OFFLOAD_BUDGET:-5.29GiB}
  off2 fp32-sel-off-budget3 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -device-budget "$b" -bench-warmup 8 -cpuprofile "$OUT/sel-off-budget.prof"
  off2 fp32-sel-off3 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -bench-warmup 8
  start=$(date +%s)
  timeout 240 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup 3 -plan -strategies device,hybrid,hybrid-ckpt \
    -hybrid-checkpoint selective -hybrid-offload -png "$OUT/memstrategies-gpt2-fp32-offload3.png" >> "$res" 2> "$L/memstrategies-offload3-fp32.log"
  say "memstrategies gpt2 fp32 device,hybrid,hybrid-ckpt(selective, offloaded): exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\||raised|placement:|placement plan|still choosing' "$L/memstrategies-offload3-fp32.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -device-budget 4GiB -bench-warmup 45"
  off2 medium-auto $m -checkpoint auto
  off2 medium-auto-exp STRATA_EXPANDABLE_SEGMENTS=1 $m -checkpoint auto
  off2 medium-auto-exp-pipe STRATA_EXPANDABLE_SEGMENTS=1 $m -checkpoint auto -pipeline-optimizer -pipeline-width 66
fi

if has offload4; then
  run_gpu_tests memory tensor checkpoint
  (cd examples/train-gpt && STRATA_REQUIRE_GPU=1 timeout 120 ../../.gpu/train-gpt.test -test.v -test.run '^TestCheckpointOffloadSameLosses$' > "$L/offtest4-train-gpt.log" 2>&1)
  say "offload test of train-gpt: exit $?"
  grep -E -- '--- (PASS|FAIL|SKIP)|panic:|worst relative' "$L/offtest4-train-gpt.log" | tee -a "$OUT/summary.txt"
  off2 fp32-sel-off4 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -bench-warmup 8
  off2 fp32-sel-off-budget4 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -device-budget "${OFFLOAD_BUDGET:-5.29GiB}" -bench-warmup 8
  start=$(date +%s)
  timeout 240 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup 3 -plan -strategies device,hybrid,hybrid-ckpt \
    -hybrid-checkpoint selective -hybrid-offload -png "$OUT/memstrategies-gpt2-fp32-offload4.png" >> "$res" 2> "$L/memstrategies-offload4-fp32.log"
  say "memstrategies gpt2 fp32 device,hybrid,hybrid-ckpt(selective, offloaded, half the device's peak): exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\||raised|placement:|placement plan|still choosing' "$L/memstrategies-offload4-fp32.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
  start=$(date +%s)
  timeout 120 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup 6 -strategies hybrid-ckpt -budget off \
    -hybrid-checkpoint selective -hybrid-offload -png "" >> "$res" 2> "$L/memstrategies-offload4b-fp32.log"
  say "memstrategies gpt2 fp32 hybrid-ckpt(selective, offloaded, no budget): exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\|' "$L/memstrategies-offload4b-fp32.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
  off2 medium-auto4 -config gpt2-medium -precision bf16 -attention fused -head fused -device-budget 4GiB -bench-warmup 45 -checkpoint auto
fi

if has offload5; then
  run_gpu_tests memory tensor
  off2 fp32-sel-off-budget5 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -device-budget "${OFFLOAD_BUDGET:-5.29GiB}" -bench-warmup 8
  start=$(date +%s)
  timeout 200 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup 6 -strategies device,hybrid-ckpt \
    -hybrid-checkpoint selective -hybrid-offload -png "$OUT/memstrategies-gpt2-fp32-offload5.png" >> "$res" 2> "$L/memstrategies-offload5-fp32.log"
  say "memstrategies gpt2 fp32 device,hybrid-ckpt(selective, offloaded, half the device's peak): exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\|' "$L/memstrategies-offload5-fp32.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
fi

if has offload6; then
  off2 fp32-sel-off-budget-exp STRATA_EXPANDABLE_SEGMENTS=1 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -device-budget "${OFFLOAD_BUDGET:-5.29GiB}" -bench-warmup 6
  start=$(date +%s)
  STRATA_EXPANDABLE_SEGMENTS=1 timeout 100 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup 3 -strategies device,hybrid,hybrid-ckpt \
    -hybrid-checkpoint selective -hybrid-offload -png "" >> "$res" 2> "$L/memstrategies-offload6-fp32.log"
  say "memstrategies gpt2 fp32 expandable device,hybrid,hybrid-ckpt(selective, offloaded, half the device's peak): exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\||placement:' "$L/memstrategies-offload6-fp32.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
fi

# keep_table TAG WARMUP KEEP...: memstrategies' gpt2 fp32 device and
# hybrid-ckpt rows (selective, offloaded, half the device row's peak) at
# each -hybrid-offload-keep.
keep_table() {
  local tag=$1 warm=$2 k start; shift 2
  for k in "$@"; do
    start=$(date +%s)
    timeout 100 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup "$warm" -strategies device,hybrid-ckpt \
      -hybrid-checkpoint selective -hybrid-offload -hybrid-offload-keep "$k" -png "" >> "$res" 2> "$L/memstrategies-$tag$k-fp32.log"
    say "memstrategies gpt2 fp32 device,hybrid-ckpt(selective, offloaded keep $k, half the device's peak): exit $? in $(( $(date +%s) - start ))s"
    grep -E '^\||placement:' "$L/memstrategies-$tag$k-fp32.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
  done
}

if has keep; then
  # How many of the last blocks keep what they hold on the device
  # (-checkpoint-offload-keep): gpt2 fp32 selective offloaded under half
  # the device row's peak, classic and expandable segments; the seed
  # table's rows at the keeps that fit; gpt2-medium bf16 under 4 GiB with
  # expandable segments, and unconstrained, in the same call.
  b=${OFFLOAD_BUDGET:-5.29GiB}
  for k in auto 2 3 4 6; do
    off2 fp32-keep$k -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -checkpoint-offload-keep $k -device-budget "$b" -bench-warmup 6
  done
  for k in auto 2; do
    off2 fp32-keep$k-exp STRATA_EXPANDABLE_SEGMENTS=1 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -checkpoint-offload-keep $k -device-budget "$b" -bench-warmup 6
  done
  off2 fp32-keep2-nobudget -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -bench-warmup 6
  timeout 60 .gpu/train-gpt -device cuda -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -device-budget "$b" \
    -memory-plot "$OUT/fp32-keep2-budget.png" -memory-step 4 > "$L/plot-keep2.log" 2>&1
  say "memory plot, fp32 selective offloaded keep 2 under $b: exit $?"
  keep_table keep 6 ${KEEP_TABLE:-auto 4 6}
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  off2 medium-none $m
  off2 medium-auto-exp STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint auto -bench-warmup 50
  off2 medium-blocks-exp STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks
fi

if has keepab; then
  # The keeps again, two rounds, beside no checkpointing and selective on
  # the device (the references, in the same call), then the placement's
  # own choice (-checkpoint-offload-keep auto) after enough steps.
  b=${OFFLOAD_BUDGET:-5.29GiB}
  off2 fp32-none -config gpt2 -precision fp32 -bench-warmup 3
  off2 fp32-sel-budget -config gpt2 -precision fp32 -checkpoint selective -device-budget "$b" -bench-warmup 6
  for i in 1 2; do
    for k in ${KEEPS:-2 3 4 6 9}; do
      off2 fp32-keep$k-r$i -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -checkpoint-offload-keep $k -device-budget "$b" -bench-warmup 6
    done
  done
  off2 fp32-keepauto -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -device-budget "$b" -bench-warmup 14
  for k in 2 3 auto; do
    off2 fp32-keep$k-exp STRATA_EXPANDABLE_SEGMENTS=1 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -checkpoint-offload-keep $k -device-budget "$b" -bench-warmup 14
  done
  keep_table keepab 14 ${KEEP_TABLE:-3 auto}
fi

if has target; then
  # Session 18: the scheduler's target no longer falls for a spill that
  # only the budget refused (gpt2-medium's 786 MiB logits in its first
  # step): gpt2-medium bf16 unconstrained and under 4 GiB (classic and
  # expandable segments, plain and pipelined update, offloaded block
  # inputs), the placement's plans; gpt2 fp32's references and offloaded
  # keeps under half the device row's peak; the seed table's row.
  m="-config gpt2-medium -precision bf16 -attention fused -head fused"
  off2 medium-none $m -bench-warmup 25
  off2 medium-blocks-exp STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks -bench-warmup 25
  off2 medium-blocks $m -device-budget 4GiB -checkpoint blocks -bench-warmup 25
  off2 medium-blocks-exp-pipe STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks -pipeline-optimizer -bench-warmup 25
  off2 medium-blocks-off $m -device-budget 4GiB -checkpoint blocks -checkpoint-offload -bench-warmup 25
  off2 medium-auto-exp STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint auto -bench-warmup 50
  for f in medium-blocks-exp medium-blocks; do
    grep -E 'placement plan after|^strata: memory' "$L/off2-$f.log" | cut -c1-240 | head -6 | tee -a "$OUT/summary.txt"
  done
  b=${OFFLOAD_BUDGET:-5.29GiB}
  off2 fp32-none -config gpt2 -precision fp32 -bench-warmup 3
  off2 fp32-sel-budget -config gpt2 -precision fp32 -checkpoint selective -device-budget "$b" -bench-warmup 6
  off2 fp32-keep2 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -checkpoint-offload-keep 2 -device-budget "$b" -bench-warmup 6
  for k in ${TARGET_KEEPS:-8 10 12}; do
    off2 fp32-keep$k -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -checkpoint-offload-keep $k -device-budget "$b" -bench-warmup 6
  done
  off2 fp32-keepauto -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -device-budget "$b" -bench-warmup 24
  keep_table target 24 ${KEEP_TABLE:-auto 10}
fi

if has plantrace; then
  # Session 18 (issue 12): the memory suite with classic and expandable
  # segments, and both shared traces replayed over device memory with
  # expandable segments, without and with step plans (-plan-steps).
  run_gpu_tests memory
  start=$(date +%s)
  (cd memory && STRATA_EXPANDABLE_SEGMENTS=1 STRATA_REQUIRE_GPU=1 timeout 240 ../.gpu/memory.test -test.v -test.timeout 230s > "$L/test-memory-exp.log" 2>&1)
  say "test memory STRATA_EXPANDABLE_SEGMENTS=1: exit $? in $(( $(date +%s) - start ))s; $(grep -c '^=== RUN' "$L/test-memory-exp.log") run, $(grep -c -- '--- SKIP' "$L/test-memory-exp.log") skipped, $(grep -c -- '--- FAIL' "$L/test-memory-exp.log") failed"
  grep -E -- '--- FAIL|panic:' "$L/test-memory-exp.log" | head -10 | tee -a "$OUT/summary.txt"
  for p in -plan-steps=false -plan-steps; do
    STRATA_EXPANDABLE_SEGMENTS=1 timeout 150 .gpu/bench-alloc -no-bench -segments expandable $p -trace bench/traces/trace-char-fp32.csv -trace bench/traces/trace-char-fp16-ckpt.csv \
      >> "$L/plantrace.jsonl" 2> "$L/plantrace$p.md"
    say "bench-alloc traces over device memory, expandable ${p:-(no plans)}: exit $?"
    grep -E '^\|' "$L/plantrace$p.md" | tee -a "$OUT/summary.txt"
  done
  cat "$L/plantrace.jsonl" >> "$res"
fi

if has verify20; then
  # Session 20: where the offloaded bytes change under expandable segments.
  for v in "STRATA_EXPANDABLE_SEGMENTS=0" "STRATA_EXPANDABLE_SEGMENTS=1" "STRATA_EXPANDABLE_SEGMENTS=1 CUDA_LAUNCH_BLOCKING=1"; do
    log=$L/verify20-$(echo "$v" | tr ' =' '__')-$RANDOM.log
    start=$(date +%s)
    offload_test "$log" STRATA_MOVE_VERIFY=1 STRATA_MEMORY_POISON=1 $v
    say "verify20 $v: exit $? in $(( $(date +%s) - start ))s; $(grep -c STRATA_MOVE_VERIFY "$log") move reports"
    grep -E -- 'STRATA_MOVE_VERIFY|losses|--- FAIL|--- PASS|panic:|Error' "$log" | head -40 | cut -c1-400 | tee -a "$OUT/summary.txt"
  done
fi

if has guard20; then
  # Session 20: the same test with STRATA_MEMORY_GUARD=1 (4 KiB guards
  # after every tensor, checked at release; released bytes set to NaN).
  for v in "STRATA_EXPANDABLE_SEGMENTS=0" "STRATA_EXPANDABLE_SEGMENTS=1"; do
    log=$L/guard20-$(echo "$v" | tr ' =' '__')-$RANDOM.log
    start=$(date +%s)
    offload_test "$log" STRATA_MEMORY_GUARD=1 $v
    say "guard20 $v: exit $? in $(( $(date +%s) - start ))s; $(grep -c STRATA_MEMORY_GUARD "$log") guard reports"
    grep -E -- 'STRATA_MEMORY_GUARD|losses|step 1:|--- FAIL|--- PASS|panic:' "$log" | sort | uniq -c | sort -rn | head -40 | cut -c1-400 | tee -a "$OUT/summary.txt"
  done
fi

if has bisect20; then
  # Session 20: expandable device memory with STRATA_MEMORY_GUARD=1: the
  # tensor and autograd GPU suites (which ops read poisoned bytes), then
  # train-gpt's first run (no offload) under knobs that take parts out.
  for pkg in ${BISECT_SUITES:-memory tensor autograd}; do
    log=$L/bisect20-suite-$pkg.log
    start=$(date +%s)
    (cd $pkg && env STRATA_EXPANDABLE_SEGMENTS=1 STRATA_MEMORY_GUARD=poison STRATA_MEMORY_CHECK=$([ $pkg = memory ] && echo 1 || echo 0) STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/$pkg.test -test.run 'GPU|CUDA|Cuda' -test.v -test.timeout 190s > "$log" 2>&1)
    say "bisect20 $pkg suite (expandable, guard): exit $? in $(( $(date +%s) - start ))s; $(grep -c -- '--- FAIL' "$log") failed, $(grep -c STRATA_MEMORY_GUARD "$log") guard reports"
    grep -E -- '^\s*--- FAIL|STRATA_MEMORY_GUARD|panic:' "$log" | head -30 | cut -c1-300 | tee -a "$OUT/summary.txt"
  done
  for v in "STRATA_MEMORY_CHECK=1 STRATA_MEMORY_GUARD=1" "STRATA_MEMORY_CHECK=1" "STRATA_MEMORY_GUARD=poison" "STRATA_MEMORY_GUARD=poison STRATA_EXPANDABLE_LEND=0" \
      "STRATA_MEMORY_GUARD=poison CUDA_LAUNCH_BLOCKING=1" "STRATA_MEMORY_GUARD=poison STRATA_VMM_COPY_ENGINE=1" "STRATA_EXPANDABLE_SEGMENTS=0 STRATA_MEMORY_GUARD=poison"; do
    log=$L/bisect20-tg-$(echo "$v" | tr ' =' '__').log
    start=$(date +%s)
    offload_test "$log" STRATA_EXPANDABLE_SEGMENTS=1 $v
    say "bisect20 train-gpt $v: exit $? in $(( $(date +%s) - start ))s; $(grep -c STRATA_MEMORY_GUARD "$log") guard reports"
    grep -E -- 'STRATA_MEMORY_GUARD|losses|not finite|--- FAIL|--- PASS|panic|memory: pool' "$log" | head -8 | cut -c1-1200 | tee -a "$OUT/summary.txt"
  done
fi

if has poison20; then
  # Session 20: released bytes poisoned by the fill kernel instead of the
  # copy engine's memset: the tensor suite and train-gpt's offload test.
  log=$L/poison20-suite-tensor.log
  (cd tensor && env STRATA_EXPANDABLE_SEGMENTS=1 STRATA_MEMORY_GUARD=poison-kernel STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/tensor.test -test.run 'GPU|CUDA|Cuda' -test.v -test.timeout 190s > "$log" 2>&1)
  say "poison20 tensor suite (expandable, poison-kernel): exit $?; $(grep -c -- '--- FAIL' "$log") failed"
  grep -E -- '^\s*--- FAIL|panic:|Messages' "$log" | head -16 | cut -c1-300 | tee -a "$OUT/summary.txt"
  for v in "STRATA_MEMORY_GUARD=poison-kernel" "STRATA_MEMORY_GUARD=poison-kernel CUDA_LAUNCH_BLOCKING=1" "STRATA_MEMORY_GUARD=poison" \
      "STRATA_MEMORY_GUARD=poison-kernel STRATA_EXPANDABLE_SEGMENTS=0" "STRATA_MEMORY_GUARD=poison-kernel STRATA_MEMORY_CHECK=1"; do
    log=$L/poison20-tg-$(echo "$v" | tr ' =' '__').log
    start=$(date +%s)
    offload_test "$log" STRATA_EXPANDABLE_SEGMENTS=1 $v
    say "poison20 train-gpt $v: exit $? in $(( $(date +%s) - start ))s"
    grep -E -- 'losses|not finite|--- FAIL|--- PASS|panic|memory: pool' "$log" | head -6 | cut -c1-1200 | tee -a "$OUT/summary.txt"
  done
fi

if has knobs20; then
  # Session 20: plain expandable training (no poison): the first run's
  # step-1 loss (classic: 5.496233) under knobs that change host timing.
  set -- "A=1" "A=2" "GOGC=off" "GOGC=off A=2" "GOMAXPROCS=1" "GOMAXPROCS=1 A=2" "STRATA_MEMORY_CHECK=1" "GODEBUG=gccheckmark=0 GOGC=1"
  if [ -n "${KNOBS_B:-}" ]; then
    set -- "STRATA_CUDA_NO_POOLS=1" "STRATA_CUDA_NO_POOLS=1 A=2" "GOGC=off STRATA_CUDA_NO_POOLS=1" "GOGC=1" "GOGC=1 A=2" "GOGC=5" "GOGC=20"
  fi
  for v in "$@"; do
    log=$L/knobs20-$(echo "$v" | tr ' =' '__').log
    offload_test "$log" STRATA_EXPANDABLE_SEGMENTS=1 $v
    say "knobs20 $v: exit $?; $(grep -o 'step 1: loss [0-9.e+-]*, want [0-9.e+-]*' "$log" | head -3 | tr '\n' ' ') $(grep -c 'worst relative difference 0$' "$log")/3 configs exact"
  done
fi

if has sync20; then
  # Session 20: expandable device memory (STRATA_EXPANDABLE_UNSAFE=1) with
  # a synchronisation before each map and unmap of pages
  # (STRATA_EXPANDABLE_SYNC=1), or without taking pages from free blocks
  # (STRATA_EXPANDABLE_STEAL=0): the tensor suite's poisoned cases, then
  # train-gpt's offload test plain and poisoned.
  for v in "A=1" "STRATA_EXPANDABLE_SYNC=1" "STRATA_EXPANDABLE_STEAL=0"; do
    log=$L/sync20-suite-$(echo "$v" | tr ' =' '__').log
    (cd tensor && env STRATA_EXPANDABLE_SEGMENTS=1 STRATA_EXPANDABLE_UNSAFE=1 STRATA_MEMORY_GUARD=poison-kernel STRATA_REQUIRE_GPU=1 $v timeout 100 ../.gpu/tensor.test \
      -test.run 'TestCUDAConformance' -test.v -test.timeout 90s > "$log" 2>&1)
    say "sync20 tensor conformance (poison-kernel) $v: exit $?; $(grep -c -- '--- FAIL' "$log") failed: $(grep -E -- '--- FAIL' "$log" | grep -o 'OpsNN/[A-Za-z/]*' | sort -u | tr '\n' ' ')"
  done
  for v in "A=1" "STRATA_EXPANDABLE_SYNC=1" "STRATA_EXPANDABLE_STEAL=0" "STRATA_MEMORY_GUARD=poison-kernel STRATA_EXPANDABLE_SYNC=1" "STRATA_MEMORY_GUARD=poison-kernel STRATA_EXPANDABLE_STEAL=0"; do
    log=$L/sync20-tg-$(echo "$v" | tr ' =' '__').log
    offload_test "$log" STRATA_EXPANDABLE_SEGMENTS=1 $v
    say "sync20 train-gpt $v: exit $?; $(grep -o 'step 1: loss [0-9.e+-]*, want [0-9.e+-]*' "$log" | head -3 | tr '\n' ' ') $(grep -c 'worst relative difference 0$' "$log")/3 configs exact $(grep -o 'not finite' "$log" | head -1)"
  done
fi

if has offbf21; then
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  off2 ob21-none $m
  off2 ob21-off-bf16g-1 STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks -grad-dtype bf16 -checkpoint-offload
  off2 ob21-off STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks -checkpoint-offload
  off2 ob21-off-bf16g-2 STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks -grad-dtype bf16 -checkpoint-offload
  for f in $L/off2-ob21-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s peak_mib_by_tier)"; done
fi

if has final21; then
  run_gpu_tests tensor autograd nn
  for g in fp32 bf16; do
    start=$(date +%s)
    STRATA_EXPANDABLE_SEGMENTS=1 timeout 100 .gpu/train-gpt -device cuda -config gpt2-medium -precision bf16 -attention fused -head fused \
      -device-budget 4GiB -checkpoint blocks -grad-dtype $g -memory-step 30 -memory-plot "$OUT/s21-medium-4GiB-grads-$g.png" > "$L/final21-$g.log" 2>&1
    say "final21 memory plot, $g gradients: exit $? in $(( $(date +%s) - start ))s"
    grep -iE 'peak|error|panic' "$L/final21-$g.log" | head -6 | cut -c1-300 | tee -a "$OUT/summary.txt"
  done
fi

if has loss21; then
  # Session 21: does gpt2-medium train under the 4 GiB budget as without
  # it, with float32 and with bf16 gradients? Real text: every Markdown
  # file of the repository, GPT-2's tokens (the last tenth held out).
  cat README.md $(git ls-files '*.md' 2>/dev/null || ls bench/results/*.md) > "$L/text.txt" 2>/dev/null
  lm="-config gpt2-medium -precision bf16 -attention fused -head fused -data $L/text.txt -tokenizer gpt2 -batch 8 -steps 60 -warmup 10 -lr 3e-4 -eval-every 0 -sample 0 -quiet -out"
  for v in "none" "budget" "budget-bf16g"; do
    case $v in
      none) extra="" ;;
      budget) extra="-device-budget 4GiB -checkpoint blocks" ;;
      budget-bf16g) extra="-device-budget 4GiB -checkpoint blocks -grad-dtype bf16" ;;
    esac
    start=$(date +%s)
    exp=STRATA_EXPANDABLE_SEGMENTS=1; [ $v = none ] && exp=STRATA_LOSS21=none
    env $exp timeout 150 .gpu/train-gpt -device cuda $lm "" $extra -loss-log "$OUT/loss21-$v.jsonl" > "$L/loss21-$v.log" 2>&1
    say "loss21 $v: exit $? in $(( $(date +%s) - start ))s; losses $(python3 -c "import json,sys; l=[json.loads(x)['loss'] for x in open(sys.argv[1])]; print(' '.join('%.4f'%v for v in l[::10]), 'last %.4f'%l[-1])" "$OUT/loss21-$v.jsonl" 2>/dev/null)"
    grep -iE 'error|panic' "$L/loss21-$v.log" | head -3 | tee -a "$OUT/summary.txt"
  done
fi

if has half22 && [ -z "${STRATA_KERNELS:-}" ]; then
  say "half22: no fresh kernels (FRESH_KERNELS=1 and nvcc needed): the programs' embedded kernels predate the half-gradient ones"
elif has half22; then
  run_gpu_tests tensor
  for t in "tensor TestAdamWStepsHalfGradients|TestHalfGradientsInClipping|TestSumSquares.*|TestAdamWStepsPipelined" "nn TestAdamWHalfGradients|TestAdamWPipelineSameBits" "examples/train-gpt TestGradDTypeBF16|TestPipelineOptimizerSameLosses"; do
    pkg=${t%% *} pat=${t#* } bin=$PWD/.gpu/$(basename ${t%% *}).test
    [ -x "$bin" ] || { say "h22 $pkg: no binary"; continue; }
    (cd "$pkg" && STRATA_REQUIRE_GPU=1 timeout 200 "$bin" -test.v -test.run "^($pat)\$" > "$L/h22-test-$(basename $pkg).log" 2>&1)
    say "h22 $pkg $pat on the GPU: exit $?"
    grep -E -- '^--- (PASS|FAIL|SKIP)|    --- (PASS|FAIL)|losses|panic:' "$L/h22-test-$(basename $pkg).log" | head -24 | cut -c1-250 | tee -a "$OUT/summary.txt"
  done
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks"
  off2 h22-none-a $m
  off2 h22-pipe $b -pipeline-optimizer
  off2 h22-pipe-bf16g $b -pipeline-optimizer -grad-dtype bf16
  off2 h22-plain-bf16g $b -grad-dtype bf16
  off2 h22-pipe-w16-bf16g $b -pipeline-optimizer -pipeline-width 16 -grad-dtype bf16
  off2 h22-pipe-w66-bf16g $b -pipeline-optimizer -pipeline-width 66 -grad-dtype bf16
  off2 h22-none-40 $m -steps 40
  off2 h22-pipe-bf16g-40 $b -pipeline-optimizer -grad-dtype bf16 -steps 40
  off2 h22-pipe-40 $b -pipeline-optimizer -steps 40
  off2 h22-none-b $m
  for f in $L/off2-h22-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps peak_mib_by_tier)"; done
fi

if has ck23; then
  for e in "STRATA_EXPANDABLE_SEGMENTS=0" "STRATA_EXPANDABLE_SEGMENTS=1"; do
    log=$L/ck23-tensor-$e.log
    (cd tensor && env $e STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/tensor.test -test.v -test.timeout 190s \
      -test.run 'Move|TestAdamWStepsHalfGradients|TestHalfGradientsInClipping|TestAdamWStepsPipelined' > "$log" 2>&1)
    say "ck23 tensor move and half-gradient tests, $e: exit $?; $(grep -c -- '--- PASS' "$log") passed, $(grep -c -- '--- FAIL' "$log") failed, $(grep -c -- '--- SKIP' "$log") skipped"
    grep -E -- '--- FAIL|panic:' "$log" | head -8 | tee -a "$OUT/summary.txt"
  done
  log=$L/ck23-memory.log
  (cd memory && STRATA_REQUIRE_GPU=1 timeout 100 ../.gpu/memory.test -test.v -test.run 'TestGPUSpillToOffload|TestOffloadMemoryEnv' > "$log" 2>&1)
  say "ck23 memory offload tests: exit $?"
  grep -E -- '--- (PASS|FAIL|SKIP)|spill' "$log" | head -8 | cut -c1-250 | tee -a "$OUT/summary.txt"
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks"
  off2 c23-none-a $m
  off2 c23-pipe $b -pipeline-optimizer
  off2 c23-pipe-off $b -pipeline-optimizer -checkpoint-offload
  off2 c23-pipe-off-bf16g $b -pipeline-optimizer -checkpoint-offload -grad-dtype bf16
  off2 c23-pipe-off-bf16g-k0 $b -pipeline-optimizer -checkpoint-offload -checkpoint-offload-keep 0 -grad-dtype bf16
  off2 c23-pipe-off-bf16g-k4 $b -pipeline-optimizer -checkpoint-offload -checkpoint-offload-keep 4 -grad-dtype bf16
  off2 c23-plain-off-bf16g $b -checkpoint-offload -grad-dtype bf16
  off2 c23-pipe-pinned STRATA_OFFLOAD_MEMORY=pinned $b -pipeline-optimizer
  off2 c23-pipe-pinned-off-bf16g STRATA_OFFLOAD_MEMORY=pinned $b -pipeline-optimizer -checkpoint-offload -grad-dtype bf16
  off2 c23-plain-pinned STRATA_OFFLOAD_MEMORY=pinned $b
  off2 c23-none-b $m
  for f in $L/off2-c23-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps driver_calls_per_step peak_mib_by_tier)"; done
fi

# The configs of frag24 and exp24: name, then train-gpt's flags.
frag24_configs=(
  "char-fp32 -config char -precision fp32 -attention plain"
  "char-fp16-ckpt -config char -precision fp16 -attention plain -checkpoint blocks"
  "gpt2-fp32 -config gpt2 -precision fp32 -attention plain"
  "gpt2-fp16-ckpt -config gpt2 -precision fp16 -attention plain -checkpoint blocks"
  "char-bf16 -config char -precision bf16 -attention fused"
  "gpt2-bf16 -config gpt2 -precision bf16 -attention fused"
  "gpt2-medium-bf16 -config gpt2-medium -precision bf16 -attention fused -head fused"
)

# frag24_table PREFIX: a table of peak reserved / peak allocated of the
# runs off2 named PREFIX-NAME-VARIANT (variant: exp1/exp0, or the program).
frag24_table() {
  python3 - "$L" "$1" <<'PY'
import glob, json, sys
logs, prefix = sys.argv[1], sys.argv[2]
print("| run | variant | graph | peak allocated MiB | peak reserved MiB | reserved/allocated | tokens/s | loss |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for f in sorted(glob.glob(f"{logs}/off2-{prefix}-*.jsonl")):
    for l in open(f):
        d = json.loads(l)
        if not d.get("peak_bytes"):
            continue
        n = f.split(f"off2-{prefix}-")[1][:-6]
        for v, label in (("-exp1", "expandable"), ("-exp0", "classic"), ("-train-gpt-base", "before"), ("-train-gpt", "after")):
            if n.endswith(v):
                n = n[:-len(v)]
                break
        print(f"| {n} | {label} | {d.get('graph_kernels_per_step', 0) > 0} | {d['peak_bytes']/2**20:,.0f} | {d['peak_reserved_bytes']/2**20:,.0f} | {d['peak_reserved_bytes']/d['peak_bytes']:.3f} | {d['tok_s']:,.0f} | {d['loss']} |")
PY
}

if has main24; then
  unset STRATA_EXPANDABLE_SEGMENTS
  start=$(date +%s)
  (cd /tmp && timeout 120 "$OLDPWD/.gpu/train-gpt" > "$L/main24.log" 2>&1)
  say "main job (train-gpt, no flags): exit $? in $(( $(date +%s) - start ))s"
  grep -E "^strata train-gpt|^model|held-out accuracy 100|^step +6000|captured|expandable|segments" "$L/main24.log" | head -8 | cut -c1-220 | tee -a "$OUT/summary.txt"
  grep -A14 "strata memory summary" "$L/main24.log" | tee -a "$OUT/summary.txt"
  for v in "char-bf16 -config char -precision bf16 -attention fused" "gpt2-bf16 -config gpt2 -precision bf16 -attention fused"; do
    name=${v%% *} flags=${v#* }
    for r in a b; do for e in 1 0; do off2 m24-$name-eager-exp$e-$r STRATA_EXPANDABLE_SEGMENTS=$e $flags -cuda-graph off; done; done
  done
  for f in $L/off2-m24-*.jsonl; do say "$(basename $f): $(jfields "$f" tok_s peak_bytes peak_reserved_bytes loss driver_calls_per_step)"; done
fi

if has suites24; then
  unset STRATA_EXPANDABLE_SEGMENTS
  # SEGMENTS=0: the suites on classic device segments (no longer the default)
  [ -n "${SEGMENTS:-}" ] && export STRATA_EXPANDABLE_SEGMENTS=$SEGMENTS
  run_gpu_tests ${SUITES:-memory tensor autograd nn amp checkpoint dist examples/train-gpt}
fi

if has exp24; then
  for e in 1 0; do
    log=$L/exp24-graph-exp$e.log
    (cd tensor && STRATA_EXPANDABLE_SEGMENTS=$e STRATA_REQUIRE_GPU=1 timeout 120 ../.gpu/tensor.test -test.v -test.run 'CaptureGraph' > "$log" 2>&1)
    say "exp24 tensor capture tests, STRATA_EXPANDABLE_SEGMENTS=$e: exit $?"; grep -E -- '--- (PASS|FAIL|SKIP)|Error|panic' "$log" | head -12 | tee -a "$OUT/summary.txt"
    log=$L/exp24-tg-graph-exp$e.log
    [ -x .gpu/train-gpt.test ] && (cd examples/train-gpt && STRATA_EXPANDABLE_SEGMENTS=$e STRATA_REQUIRE_GPU=1 timeout 200 ../../.gpu/train-gpt.test -test.v -test.run 'TestGPUCUDAGraphSameLosses' > "$log" 2>&1)
    say "exp24 train-gpt graph losses, STRATA_EXPANDABLE_SEGMENTS=$e: exit $?"; grep -E -- '--- (PASS|FAIL|SKIP)|Error|panic|captured' "$log" | head -12 | tee -a "$OUT/summary.txt"
  done
  for v in "${frag24_configs[@]}"; do
    name=${v%% *} flags=${v#* }
    for e in 1 0; do
      off2 ex24-$name-exp$e STRATA_EXPANDABLE_SEGMENTS=$e $flags
      grep -E "captured|continuing without" "$L/off2-ex24-$name-exp$e.log" | head -3 | cut -c1-250 | tee -a "$OUT/summary.txt"
    done
  done
  frag24_table ex24 | tee -a "$OUT/summary.txt"
fi

if has frag24; then
  log=$L/frag24-graph.log
  (cd tensor && STRATA_REQUIRE_GPU=1 timeout 120 ../.gpu/tensor.test -test.v -test.run 'CaptureGraph' > "$log" 2>&1)
  say "frag24 tensor capture tests: exit $?"; grep -E -- '--- (PASS|FAIL|SKIP)|Error|panic' "$log" | head -12 | tee -a "$OUT/summary.txt"
  for v in "${frag24_configs[@]}"; do
    name=${v%% *} flags=${v#* }
    for tg in train-gpt train-gpt-base; do
      [ -x .gpu/$tg ] || continue
      TG=$tg off2 fr24-$name-$tg $flags
    done
  done
  frag24_table fr24 | tee -a "$OUT/summary.txt"
  if [ -f .gpu/torch_gpt.py ]; then
    timeout 240 python3 bench/torch_traces.py .gpu traces "$OUT/traces" > "$L/torch-traces.jsonl" 2>&1
    say "torch traces: exit $?; $(ls "$OUT/traces" 2>/dev/null | wc -l) files"; cut -c1-300 "$L/torch-traces.jsonl" | tee -a "$OUT/summary.txt"
    (cd "$OUT" && tar -cJf traces.tar.xz traces && rm -rf traces)
  fi
fi

if has live24 && [ -f .gpu/torch_gpt.py ]; then
  timeout 400 python3 bench/torch_traces.py .gpu live > "$L/torch-live.jsonl" 2>&1
  say "torch live: exit $?"; cut -c1-400 "$L/torch-live.jsonl" | tee -a "$OUT/summary.txt"
  cat "$L/torch-live.jsonl" >> "$res"
fi

if has val24; then
  for e in 0 1; do
    log=$L/val24-tensor-exp$e.log
    (cd tensor && STRATA_EXPANDABLE_SEGMENTS=$e STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/tensor.test -test.v -test.run 'TestGPUPipelineRing|TestGPUPipelineTrace|TestAdamWStepsPipelined$|TestMoveTo$|TestAdamWStepsOverlapped|TestAdamWStepsHalfGradients' > "$log" 2>&1)
    say "val24 tensor ring/trace/pipelined tests, STRATA_EXPANDABLE_SEGMENTS=$e: exit $?"; grep -E -- '--- (PASS|FAIL|SKIP)|Error|panic' "$log" | head -24 | tee -a "$OUT/summary.txt"
  done
  log=$L/val24-memory.log
  (cd memory && STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/memory.test -test.v -test.run 'GPU|CUDA|Hold' > "$log" 2>&1)
  say "val24 memory GPU tests: exit $?; $(grep -c -- '--- PASS' "$log") passed, $(grep -c -- '--- FAIL' "$log") failed, $(grep -c -- '--- SKIP' "$log") skipped"; grep -E -- '--- FAIL|panic' "$log" | head -12 | tee -a "$OUT/summary.txt"
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks"
  off2 v24-none $m
  off2 v24-pipe $b -pipeline-optimizer
  grep -E "copy ring" "$L/off2-v24-pipe.log" | tee -a "$OUT/summary.txt"
  for f in $L/off2-v24-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps driver_calls_per_step peak_mib_by_tier)"; done
fi

if has fin23; then
  run_gpu_tests memory tensor nn
  log=$L/fin23-ring-exp.log
  (cd tensor && STRATA_EXPANDABLE_SEGMENTS=1 STRATA_REQUIRE_GPU=1 timeout 150 ../.gpu/tensor.test -test.v -test.run 'TestGPUPipelineRing|TestAdamWStepsPipelined$|TestMoveTo$|TestAdamWStepsHalfGradients' > "$log" 2>&1)
  say "fin23 tensor ring tests on expandable memory: exit $?"; grep -E -- '--- (PASS|FAIL)|Error|panic' "$log" | head -12 | tee -a "$OUT/summary.txt"
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="STRATA_EXPANDABLE_SEGMENTS=1 STRATA_PIPELINE_TRACE=1 $m -device-budget 4GiB -checkpoint blocks"
  off2 f23-none-a $m
  for v in "pipe -pipeline-optimizer" "pipe-noring STRATA_PIPELINE_RING=0 -pipeline-optimizer" "plain" "pipe-bf16g -pipeline-optimizer -grad-dtype bf16" "pipe-40 -pipeline-optimizer -steps 40" "pipe-bf16g-40 -pipeline-optimizer -grad-dtype bf16 -steps 40"; do
    name=${v%% *} extra=${v#* }; [ "$extra" = "$v" ] && extra=""
    off2_variant f23 "$b" "$name" "$extra"
    grep -A40 "pipelined update's timeline" "$L/off2-f23-$name.log" | grep -E "^update:|^mark|^the next" | tee -a "$OUT/summary.txt"
  done
  off2 f23-none-40 $m -steps 40
  off2 f23-none-b $m
  for f in $L/off2-f23-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps driver_calls_per_step peak_mib_by_tier)"; done
fi

if has ring23; then
  for e in 0 1; do
    log=$L/ring23-tensor-exp$e.log
    [ -x .gpu/tensor.test ] && (cd tensor && STRATA_EXPANDABLE_SEGMENTS=$e STRATA_REQUIRE_GPU=1 timeout 150 ../.gpu/tensor.test -test.v -test.run 'TestGPUPipelineRing|TestGPUPipelineTrace|TestAdamWStepsPipelined$|TestMoveTo$|TestAdamWStepsOverlapped' > "$log" 2>&1)
    say "ring23 tensor ring/trace/pipelined tests, STRATA_EXPANDABLE_SEGMENTS=$e: exit $?"; grep -E -- '--- (PASS|FAIL)|Error|panic' "$log" | head -20 | tee -a "$OUT/summary.txt"
  done
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="STRATA_EXPANDABLE_SEGMENTS=1 STRATA_PIPELINE_TRACE=1 $m -device-budget 4GiB -checkpoint blocks -pipeline-optimizer"
  off2 r23-none-a $m
  for v in "pipe-pinned STRATA_OFFLOAD_MEMORY=pinned" "ring-pinned STRATA_OFFLOAD_MEMORY=pinned STRATA_PIPELINE_RING=1" "ring-managed STRATA_PIPELINE_RING=1" "ring-pinned-40 STRATA_OFFLOAD_MEMORY=pinned STRATA_PIPELINE_RING=1 -steps 40" "pipe-pinned-40 STRATA_OFFLOAD_MEMORY=pinned -steps 40"; do
    name=${v%% *} extra=${v#* }
    off2_variant r23 "$b" "$name" "$extra"
    grep -A40 "pipelined update's timeline" "$L/off2-r23-$name.log" | grep -E "^update:|^mark|^the next|^ +(0|1|2|13|25|26) " | tee -a "$OUT/summary.txt"
  done
  off2 r23-none-b $m
  for f in $L/off2-r23-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps driver_calls_per_step peak_mib_by_tier)"; done
fi

if has tl23; then
  which nsys ncu 2>&1 | head -2 | tee -a "$OUT/summary.txt"
  for e in 0 1; do
    log=$L/tl23-tensor-exp$e.log
    (cd tensor && STRATA_EXPANDABLE_SEGMENTS=$e STRATA_REQUIRE_GPU=1 timeout 100 ../.gpu/tensor.test -test.v -test.run 'TestGPUPipelineTrace|TestAdamWStepsPipelined$|TestMoveTo' > "$log" 2>&1)
    say "tl23 tensor TestGPUPipelineTrace, TestMoveTo*, STRATA_EXPANDABLE_SEGMENTS=$e: exit $?"; grep -E -- '--- (PASS|FAIL)|^ +[0-9]|update:|mark|next|Error' "$log" | head -20 | tee -a "$OUT/summary.txt"
  done
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="STRATA_EXPANDABLE_SEGMENTS=1 STRATA_PIPELINE_TRACE=1 $m -device-budget 4GiB -checkpoint blocks -pipeline-optimizer"
  off2 t23-none-a $m
  for v in "pipe" "pipe-bf16g -grad-dtype bf16" "pipe-40 -steps 40" "pipe-w66 -pipeline-width 66"; do
    name=${v%% *} extra=${v#* }; [ "$extra" = "$v" ] && extra=""
    off2 t23-$name $b $extra
    grep -A40 "pipelined update's timeline" "$L/off2-t23-$name.log" | head -40 | tee -a "$OUT/summary.txt"
  done
  off2 t23-none-b $m
  for f in $L/off2-t23-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps driver_calls_per_step)"; done
fi

if has bal22; then
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks -pipeline-optimizer"
  off2 b22-none-a $m
  off2 b22-pipe $b
  off2 b22-none-40 $m -steps 40
  off2 b22-pipe-40 $b -steps 40
  off2 b22-pipe-bf16g-40 $b -grad-dtype bf16 -steps 40
  for f in $L/off2-b22-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps)"; done
fi

if has sweep22; then
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks -pipeline-optimizer"
  off2 s22-none-a $m
  off2 s22-pipe-m03 $b -budget-margin 0.03
  off2 s22-pipe-m04 $b -budget-margin 0.04
  off2 s22-pipe-w24 $b -pipeline-width 24
  off2 s22-pipe-w40 $b -pipeline-width 40
  off2 s22-pipe $b
  off2 s22-none-40 $m -steps 40
  off2 s22-pipe-m04-40 $b -budget-margin 0.04 -steps 40
  off2 s22-none-b $m
  for f in $L/off2-s22-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps driver_calls_per_step peak_mib_by_tier)"; done
fi

if has fix22; then
  run_gpu_tests tensor
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks"
  off2 f22-none-a $m
  off2 f22-pipe $b -pipeline-optimizer
  off2 f22-pipe-bf16g $b -pipeline-optimizer -grad-dtype bf16
  off2 f22-plain $b
  off2 f22-plain-bf16g $b -grad-dtype bf16
  off2 f22-pipe-w66-bf16g $b -pipeline-optimizer -pipeline-width 66 -grad-dtype bf16
  off2 f22-none-40 $m -steps 40
  off2 f22-pipe-bf16g-40 $b -pipeline-optimizer -grad-dtype bf16 -steps 40
  off2 f22-pipe-40 $b -pipeline-optimizer -steps 40
  off2 f22-none-b $m
  for f in $L/off2-f22-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps peak_mib_by_tier)"; done
fi

if has grid22 && [ -z "${STRATA_KERNELS:-}" ]; then
  say "grid22: no fresh kernels (FRESH_KERNELS=1 and nvcc needed): the programs' embedded kernels predate adamw_multi's row count"
elif has grid22; then
  # Session 22: the pipelined update on the side stream at the greatest
  # priority in a small strided grid (cuda_side.go), against session 21's
  # program in the same call.
  run_gpu_tests cuda tensor autograd nn
  log=$L/g22-pipeline-test.log
  [ -x .gpu/train-gpt.test ] && (cd examples/train-gpt && STRATA_REQUIRE_GPU=1 timeout 200 ../../.gpu/train-gpt.test -test.run 'TestPipelineOptimizerSameLosses|TestGradDTypeBF16|TestBudgetFlags' -test.v -test.timeout 190s > "$log" 2>&1)
  say "g22 train-gpt pipelined-update tests: exit $?"
  [ -f "$log" ] && grep -E -- 'losses|--- (PASS|FAIL|SKIP)|panic:' "$log" | head -14 | cut -c1-250 | tee -a "$OUT/summary.txt"
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  b="-device-budget 4GiB -checkpoint blocks"
  off2 g22-none-a $m
  TG=train-gpt-old off2 g22-old-blocks STRATA_KERNELS= STRATA_EXPANDABLE_SEGMENTS=1 $m $b
  TG=train-gpt-old off2 g22-old-pipe STRATA_KERNELS= STRATA_EXPANDABLE_SEGMENTS=1 $m $b -pipeline-optimizer
  off2 g22-blocks STRATA_EXPANDABLE_SEGMENTS=1 $m $b
  off2 g22-pipe STRATA_EXPANDABLE_SEGMENTS=1 $m $b -pipeline-optimizer
  for w in 16 33 132 100000; do
    off2 g22-pipe-w$w STRATA_EXPANDABLE_SEGMENTS=1 $m $b -pipeline-optimizer -pipeline-width $w
  done
  off2 g22-pipe-m02 STRATA_EXPANDABLE_SEGMENTS=1 $m $b -pipeline-optimizer -budget-margin 0.02
  off2 g22-blocks-m02 STRATA_EXPANDABLE_SEGMENTS=1 $m $b -budget-margin 0.02
  off2 g22-none-b $m
  for f in $L/off2-g22-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s peak_mib_by_tier)"; done
fi

if has medium21; then
  # Session 21: issue 10's gpt2-medium under 4 GiB with expandable device
  # memory, now that training there is right: the checkpointing choices
  # with and without the pipelined update, against the unconstrained run
  # of this call (before and after the budgeted ones).
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  for t in "tensor TestHalfGradientsInClipping" "autograd TestHalfLeafGradients" "examples/train-gpt TestGradDTypeBF16"; do
    pkg=${t%% *} pat=${t#* } bin=$PWD/.gpu/$(basename ${t%% *}).test
    (cd "$pkg" && STRATA_REQUIRE_GPU=1 timeout 120 "$bin" -test.v -test.run "^($pat)\$" > "$L/m21-test-$(basename $pkg).log" 2>&1)
    say "m21 $pat on the GPU: exit $?"
    grep -E -- '--- (PASS|FAIL|SKIP)|losses|panic:|Error' "$L/m21-test-$(basename $pkg).log" | head -8 | cut -c1-300 | tee -a "$OUT/summary.txt"
  done
  off2 m21-none-a $m
  off2 m21-none-bf16g $m -grad-dtype bf16
  for v in "blocks -grad-dtype bf16" "blocks" "blocks -pipeline-optimizer" "selective -grad-dtype bf16" "auto -grad-dtype bf16" "blocks -grad-dtype bf16" "selective" "auto"; do
    off2 "m21-$(echo $v | tr ' ' '_')-$RANDOM" STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint $v
  done
  off2 m21-none-b $m
  for f in $L/off2-m21-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s peak_mib_by_tier)"; done
fi

if has check21; then
  # Session 21: the upload fix confirmed (fix20's runs), then issue 10's
  # gpt2-medium under 4 GiB measured again on expandable memory, beside
  # classic segments and the unconstrained run of this call. The losses of
  # the expandable and classic runs must agree (same seed, same steps).
  phases="$phases fix20"
fi

if has fix20; then
  # For the session after 20: does waiting for uploads (cuda_queue.go) make
  # expandable device memory right? The ordering test, the tensor and
  # autograd suites on expandable memory with poisoned releases, and
  # train-gpt's offload test plain (twice) and poisoned. All exact: the
  # CUDA device's refusal of expandable memory can go.
  log=$L/fix20-order.log
  (cd tensor && STRATA_REQUIRE_GPU=1 timeout 100 ../.gpu/tensor.test -test.run 'TestGPUExpandableUploadOrdered|TestGPUExpandableRefused' -test.v > "$log" 2>&1)
  say "fix20 upload ordering: exit $?"; grep -E -- '--- (PASS|FAIL|SKIP)|round' "$log" | head -5 | tee -a "$OUT/summary.txt"
  for pkg in tensor autograd; do
    log=$L/fix20-suite-$pkg.log
    (cd $pkg && env STRATA_EXPANDABLE_SEGMENTS=1 STRATA_EXPANDABLE_UNSAFE=1 STRATA_MEMORY_GUARD=poison-kernel STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/$pkg.test -test.run 'GPU|CUDA|Cuda' -test.v -test.timeout 190s > "$log" 2>&1)
    say "fix20 $pkg suite (expandable, poison-kernel): exit $?; $(grep -c -- '--- FAIL' "$log") failed"
    grep -E -- '^\s*--- FAIL|panic:' "$log" | head -12 | cut -c1-300 | tee -a "$OUT/summary.txt"
  done
  for v in "A=1" "A=2" "STRATA_MEMORY_GUARD=poison-kernel"; do
    log=$L/fix20-tg-$(echo "$v" | tr ' =' '__').log
    offload_test "$log" STRATA_EXPANDABLE_SEGMENTS=1 $v
    say "fix20 train-gpt $v: exit $?; $(grep -c 'worst relative difference 0$' "$log")/3 configs exact $(grep -o 'not finite' "$log" | head -1)"
  done
fi

if has check21; then
  exact=$(cat $L/fix20-tg-A_1.log $L/fix20-tg-A_2.log 2>/dev/null | grep -c 'worst relative difference 0$')
  say "check21: $exact/6 offload configs exact on expandable memory"
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  if [ "$exact" -ge 6 ]; then
    for round in 1 2; do
      off2 "c21-medium-exp-$round" STRATA_EXPANDABLE_SEGMENTS=1 STRATA_EXPANDABLE_UNSAFE=1 $m -device-budget 4GiB -checkpoint blocks
    done
  fi
  off2 c21-medium-classic $m -device-budget 4GiB -checkpoint blocks
  off2 c21-medium-none $m
  for f in $L/off2-c21-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s)"; done
fi

if has final20; then
  # Session 20's last call: the GPU suites on classic segments, memory's
  # also on expandable ones, the refusal of expandable device memory, and
  # train-gpt's offload test.
  run_gpu_tests cuda memory tensor autograd checkpoint nn
  log=$L/final20-memory-expandable.log
  (cd memory && STRATA_EXPANDABLE_SEGMENTS=1 STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/memory.test -test.v -test.timeout 190s > "$log" 2>&1)
  say "final20 memory suite on expandable segments: exit $?; $(grep -c '^=== RUN' "$log") run, $(grep -c -- '--- FAIL' "$log") failed"
  grep -E -- '--- FAIL|panic:' "$log" | head -10 | tee -a "$OUT/summary.txt"
  grep -h -E -- '--- (PASS|FAIL|SKIP): TestGPUExpandableRefused' "$L"/test-tensor.log | tee -a "$OUT/summary.txt"
  log=$L/final20-offload.log
  (cd examples/train-gpt && STRATA_REQUIRE_GPU=1 timeout 200 ../../.gpu/train-gpt.test -test.run 'TestCheckpointOffloadSameLosses|TestGPU' -test.v -test.timeout 190s > "$log" 2>&1)
  say "final20 train-gpt offload and GPU tests: exit $?"
  grep -E -- 'losses|--- FAIL|^--- PASS|panic:' "$log" | head -12 | tee -a "$OUT/summary.txt"
fi

if has expmoves; then
  # Session 19: the bf16 offload test under expandable segments, bisected.
  for v in "" "" "CUDA_LAUNCH_BLOCKING=1" "STRATA_EXPANDABLE_LEND=0" "CUDA_LAUNCH_BLOCKING=1 STRATA_EXPANDABLE_LEND=0"; do
    log=$L/expmoves-$(echo "${v:-plain}" | tr ' =' '__')-$RANDOM.log
    start=$(date +%s)
    offload_test "$log" STRATA_EXPANDABLE_SEGMENTS=1 $v
    say "expmoves ${v:-(as is)}: exit $? in $(( $(date +%s) - start ))s"
    grep -E -- 'losses|--- FAIL|--- PASS|panic:|Error' "$log" | head -12 | tee -a "$OUT/summary.txt"
  done
  # What offloaded block inputs would give gpt2-medium under 4 GiB with
  # expandable segments (the speed only: the losses are in doubt there).
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -device-budget 4GiB -bench-warmup 25 -checkpoint blocks"
  off2 medium-exp STRATA_EXPANDABLE_SEGMENTS=1 $m
  off2 medium-exp-off STRATA_EXPANDABLE_SEGMENTS=1 STRATA_EXPANDABLE_MOVES=1 $m -checkpoint-offload
  off2 medium-exp-off-nolend STRATA_EXPANDABLE_SEGMENTS=1 STRATA_EXPANDABLE_MOVES=1 STRATA_EXPANDABLE_LEND=0 $m -checkpoint-offload
fi

if has capture19; then
  # Session 19: gpt2-medium bf16 under 4 GiB (blocks, expandable), step
  # 30's memory timeline and segment map, with .gpu/train-gpt-base.xz (the
  # program before the session's memory changes) first when it is there.
  bins=train-gpt
  if [ -f .gpu/train-gpt-base.xz ]; then
    xz -dc .gpu/train-gpt-base.xz > .gpu/train-gpt-base && chmod +x .gpu/train-gpt-base && bins="train-gpt-base train-gpt"
  fi
  for bin in $bins; do
    STRATA_EXPANDABLE_SEGMENTS=1 timeout 200 .gpu/$bin -device cuda -config gpt2-medium -precision bf16 -attention fused -head fused \
      -device-budget 4GiB -checkpoint blocks -memory-step 30 -memory-trace "$L/med-$bin.json" -memory-plot "$OUT/med-$bin.png" \
      -placement-plan > "$L/med-$bin.log" 2>&1
    say "$bin gpt2-medium bf16 4 GiB blocks expandable, step 30's memory: exit $?; $(tail -1 "$L/med-$bin.log")"
  done
fi

if has final19; then
  # Session 19's last call: the GPU suites of the packages it changed, the
  # checkpoint offload test (classic segments), gpt2-medium bf16 under
  # 4 GiB (expandable, blocks) twice and unconstrained.
  run_gpu_tests tensor autograd nn checkpoint memory
  start=$(date +%s)
  (cd examples/train-gpt && STRATA_REQUIRE_GPU=1 timeout 200 ../../.gpu/train-gpt.test -test.run 'TestCheckpointOffloadSameLosses' -test.v -test.timeout 190s > "$L/final-offload.log" 2>&1)
  say "train-gpt TestCheckpointOffloadSameLosses: exit $? in $(( $(date +%s) - start ))s"
  grep -E -- '--- (PASS|FAIL)|losses' "$L/final-offload.log" | head -12 | tee -a "$OUT/summary.txt"
  m="-config gpt2-medium -precision bf16 -attention fused -head fused"
  for round in 1 2; do
    if [ -x .gpu/train-gpt-base ]; then # capture19 unpacked the program before the session's changes
      TG=train-gpt-base off2 "final-medium-exp-base-$round" STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks -bench-warmup 25
    fi
    off2 "final-medium-exp-$round" STRATA_EXPANDABLE_SEGMENTS=1 $m -device-budget 4GiB -checkpoint blocks -bench-warmup 25
  done
  off2 final-medium-none $m -bench-warmup 25
fi

# pairs_ab PREFIX ROUNDS: bench-alloc-base (when there) and bench-alloc
# -reps 5, alternating, ROUNDS rounds; tables into $L/PREFIX-pairs.md, the
# JSON lines into the results.
pairs_ab() {
  local prefix=$1 rounds=$2 r b
  for r in $(seq "$rounds"); do
    for b in bench-alloc-base bench-alloc; do
      [ -x .gpu/$b ] || continue
      timeout 150 .gpu/$b -reps 5 >> "$L/$prefix-$b.jsonl" 2> "$L/$prefix-one.md"
      say "$b pairs, round $r: exit $?"
      grep -E '^\| (pool|manager|cuMemAllocAsync|mixed|4KiB|1MiB|64MiB)' "$L/$prefix-one.md" | tee -a "$OUT/summary.txt"
      cat "$L/$prefix-one.md" >> "$L/$prefix-pairs.md"
    done
  done
  cat "$L/$prefix"-bench-alloc*.jsonl >> "$res"
}

# memory_gpu_tests PREFIX PATTERN: memory's tests matching PATTERN on the
# GPU, the counts into the summary.
memory_gpu_tests() {
  local log=$L/$1-memory.log
  (cd memory && STRATA_REQUIRE_GPU=1 timeout 200 ../.gpu/memory.test -test.v -test.run "$2" > "$log" 2>&1)
  say "$1 memory GPU tests: exit $?; $(grep -c -- '--- PASS' "$log") passed, $(grep -c -- '--- FAIL' "$log") failed, $(grep -c -- '--- SKIP' "$log") skipped"
  grep -E -- '--- FAIL|panic' "$log" | head -12 | tee -a "$OUT/summary.txt"
}

if has pair25; then
  [ -x .gpu/mb ] && .gpu/mb 2>&1 | tee -a "$OUT/summary.txt"
  for e in "" -pair-expandable; do
    (cd memory && timeout 120 ../.gpu/memory.test -test.run TestPairWindows -pair-windows 300 $e 2>&1 | grep pair-windows) | sed "s/^/${e:-classic} /" | tee -a "$OUT/summary.txt"
  done
  pairs_ab pair25 "${PAIR_ROUNDS:-2}"
  memory_gpu_tests pair25 'GPU|CUDA|Hold'
fi

if has s26; then
  say "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  for r in 1 2; do
    for t in memory-base memory; do
      [ -x .gpu/$t.test ] || continue
      for e in "" -pair-expandable; do
        (cd memory && timeout 120 ../.gpu/$t.test -test.run TestPairWindows -pair-windows 300 $e 2>&1 | grep pair-windows) | sed "s/^/$t ${e:-classic} round $r: /" | tee -a "$OUT/summary.txt"
      done
    done
  done
  pairs_ab s26 "${PAIR_ROUNDS:-3}"
  memory_gpu_tests s26 'GPU|CUDA|Hold|ExpandableSlack|EagerSteps|Mutex'
  if [ -x .gpu/train-gpt ]; then
    for e in 1 0; do
      off2 s26-gpt2-fp16-ckpt-exp$e STRATA_EXPANDABLE_SEGMENTS=$e -config gpt2 -precision fp16 -attention plain -checkpoint blocks -cuda-graph off -bench-warmup 120 -steps 100
      say "$(jfields "$L/off2-s26-gpt2-fp16-ckpt-exp$e.jsonl" tok_s peak_bytes peak_reserved_bytes pages_mapped_per_step syncs_per_step driver_calls_per_step)"
    done
    frag24_table s26 | tee -a "$OUT/summary.txt"
  fi
fi

if has s26b; then
  for c in ${PIN_CORES:-3 4}; do
    for r in $(seq "${PIN_ROUNDS:-3}"); do
      for t in memory-base memory; do
        [ -x .gpu/$t.test ] || continue
        for e in "" -pair-expandable; do
          (cd memory && timeout 120 taskset -c "$c" ../.gpu/$t.test -test.run TestPairWindows -pair-windows 300 $e 2>&1 | grep pair-windows | grep -v backend) | sed "s/^/core $c $t ${e:-classic} round $r: /" | tee -a "$OUT/summary.txt"
        done
      done
    done
  done
  (cd memory && timeout 120 ../.gpu/memory.test -test.run XXX -test.bench 'BenchmarkMutex' -test.cpu 1,2,4 -test.count 3 2>&1 | grep Benchmark) | tee -a "$OUT/summary.txt"
fi

if has eager25; then
  eager25_cfgs=("char -config char -precision bf16 -attention fused -cuda-graph off" "gpt2 -config gpt2 -precision bf16 -attention fused -cuda-graph off")
  for r in $(seq "${EAGER_ROUNDS:-2}"); do
    for v in "${eager25_cfgs[@]}"; do
      for e in 1 0; do
        off2 eg25-${v%% *}-exp$e-r$r STRATA_EXPANDABLE_SEGMENTS=$e ${v#* }
        say "$(jfields "$L/off2-eg25-${v%% *}-exp$e-r$r.jsonl" tok_s driver_calls_per_step)"
      done
    done
  done
  for v in "${eager25_cfgs[@]}"; do
    for e in 1 0; do
      n=eg25p-${v%% *}-exp$e
      off2 $n STRATA_CUDA_PROFILE=1 STRATA_EXPANDABLE_SEGMENTS=$e ${v#* }
      sed -n '/^kernel profile/,$p' "$L/off2-$n.log" > "$OUT/eager25-prof-${v%% *}-exp$e.txt"
      head -25 "$OUT/eager25-prof-${v%% *}-exp$e.txt" | tee -a "$OUT/summary.txt"
    done
  done
fi

if has long25; then
  long25_cfgs=("char-bf16 -config char -precision bf16 -attention fused -steps ${LONG_STEPS:-2000}"
    "char-fp16-ckpt -config char -precision fp16 -attention plain -checkpoint blocks -steps ${LONG_STEPS:-2000}"
    "gpt2-fp16-ckpt -config gpt2 -precision fp16 -attention plain -checkpoint blocks -steps ${LONG_STEPS_GPT2:-400}"
    "gpt2-fp32 -config gpt2 -precision fp32 -attention plain -steps ${LONG_STEPS_GPT2:-400}")
  # LONG_CFGS: a space-separated subset of the names above
  if [ -n "${LONG_CFGS:-}" ]; then
    keep=(); for v in "${long25_cfgs[@]}"; do case " $LONG_CFGS " in *" ${v%% *} "*) keep+=("$v") ;; esac; done
    long25_cfgs=("${keep[@]}")
  fi
  for v in "${long25_cfgs[@]}"; do
    for e in 1 0; do
      off2 lg25-${v%% *}-exp$e STRATA_EXPANDABLE_SEGMENTS=$e ${v#* } -cuda-graph off
    done
  done
  frag24_table lg25 | tee -a "$OUT/summary.txt"
  for f in "$L"/off2-lg25-*.jsonl; do say "$(basename "$f"): $(jfields "$f" tok_s driver_calls_per_step pages_mapped_per_step syncs_per_step)"; done
fi

if has med30; then
  m="-config gpt2-medium -precision bf16 -attention fused -head fused -bench-warmup 25"
  off2 m30-none-a $m
  off2 m30-pipe $m -device-budget 4GiB -checkpoint blocks -pipeline-optimizer
  grep -E "copy ring" "$L/off2-m30-pipe.log" | tee -a "$OUT/summary.txt"
  off2 m30-none-b $m
  for f in $L/off2-m30-*.jsonl; do say "$(basename $f): $(jfields "$f" loss tok_s steps driver_calls_per_step peak_mib_by_tier)"; done
fi

if has ce31; then
  grep -h -E -- '--- (PASS|FAIL|SKIP): (TestCrossEntropyExtremeLogits|TestReluBackwardAtNaN)' "$L"/test-tensor.log | tee -a "$OUT/summary.txt"
  start=$(date +%s)
  timeout 120 .gpu/train-gpt > "$L/ce31-main-job.log" 2>&1
  say "train-gpt (the README's main job): exit $? in $(( $(date +%s) - start ))s"
  grep -v -E '^\s*$' "$L/ce31-main-job.log" | tail -6 | cut -c1-200 | tee -a "$OUT/summary.txt"
  cp "$L/ce31-main-job.log" "$OUT/" 2>/dev/null
fi

if has fin30; then
  tr=(); for f in bench/traces/*.csv; do tr+=(-trace "$f"); done
  for d in cuda cpu; do
    timeout 200 .gpu/bench-alloc -device $d -no-bench -reps 3 "${tr[@]}" > "$L/fin30-traces-$d.jsonl" 2> "$L/fin30-traces-$d.md"
    say "bench-alloc -device $d, every trace: exit $?"
    grep -E '^\|' "$L/fin30-traces-$d.md" | tee -a "$OUT/summary.txt"
    cat "$L/fin30-traces-$d.jsonl" >> "$res"
  done
  for r in $(seq "${PAIR_ROUNDS:-1}"); do
    for d in cpu cuda; do
      timeout 150 .gpu/bench-alloc -device $d -reps 9 > "$L/fin30-pair-$d-$r.jsonl" 2> "$L/fin30-pair-$d-$r.md"
      say "bench-alloc pairs -device $d, round $r: exit $?"
      grep -E '^\| (pool|pool expandable|manager) \|' "$L/fin30-pair-$d-$r.md" | tee -a "$OUT/summary.txt"
      cat "$L/fin30-pair-$d-$r.md" >> "$L/fin30-pairs.md"
      cat "$L/fin30-pair-$d-$r.jsonl" >> "$res"
    done
  done
  cp "$L"/fin30-*.md "$OUT/" 2>/dev/null
fi

if has pair; then
  # Three processes as the machine places them, then three pinned to one
  # core each (taskset, PAIR_CORES), as allocator benchmarks are often run:
  # the hosts' cores differ by up to 1.5x (examples/bench-alloc/doc.go).
  for c in "" "" ${PAIR_CORES:-3}; do
    pin=(); [ -n "$c" ] && pin=(taskset -c "$c")
    : > "$L/pair-one.md"
    timeout 150 ${pin[@]+"${pin[@]}"} .gpu/bench-alloc -reps 9 >> "$L/pair.jsonl" 2> "$L/pair-one.md"
    rc=$?; where=unpinned; [ -n "$c" ] && where="pinned to core $c"
    say "bench-alloc pairs, $where: exit $rc"
    grep -E '^\| (pool|manager|cuMem|mixed|4KiB|1MiB|64MiB)' "$L/pair-one.md" | tee -a "$OUT/summary.txt"
    cat "$L/pair-one.md" >> "$L/pair.md"
  done
  cat "$L/pair.jsonl" >> "$res"
fi

if has wide; then
  # Session 18: the selective mode on the device keeping the MLP's wide
  # product in the last N blocks (-checkpoint-keep-wide; auto: chosen by
  # the placement under the budget), gpt2 fp32 under half the device
  # row's peak, the references in the same call; the seed table's rows.
  b=${OFFLOAD_BUDGET:-5.29GiB}
  off2 fp32-none -config gpt2 -precision fp32 -bench-warmup 3
  off2 fp32-sel-wide0 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-keep-wide 0 -device-budget "$b" -bench-warmup 6
  for k in ${WIDE_KEEPS:-6 8 9}; do
    off2 fp32-sel-wide$k -config gpt2 -precision fp32 -checkpoint selective -checkpoint-keep-wide $k -device-budget "$b" -bench-warmup 6
  done
  off2 fp32-sel-wideauto -config gpt2 -precision fp32 -checkpoint selective -device-budget "$b" -bench-warmup 40
  off2 fp32-sel-wideauto-exp STRATA_EXPANDABLE_SEGMENTS=1 -config gpt2 -precision fp32 -checkpoint selective -device-budget "$b" -bench-warmup 40
  off2 fp32-auto -config gpt2 -precision fp32 -checkpoint auto -device-budget "$b" -bench-warmup 60
  for f in fp32-sel-wideauto fp32-sel-wideauto-exp fp32-auto; do
    grep -E '^placement:' "$L/off2-$f.log" | cut -c1-240 | tee -a "$OUT/summary.txt"
  done
  start=$(date +%s)
  timeout 200 .gpu/memstrategies -config gpt2 -precision fp32 -steps 5 -warmup "${WIDE_WARM:-40}" -strategies device,hybrid,hybrid-ckpt \
    -hybrid-checkpoint selective -png "$OUT/memstrategies-gpt2-fp32-wide.png" >> "$res" 2> "$L/memstrategies-wide-fp32.log"
  say "memstrategies gpt2 fp32 device,hybrid,hybrid-ckpt(selective, wide products chosen): exit $? in $(( $(date +%s) - start ))s"
  grep -E '^\||placement:' "$L/memstrategies-wide-fp32.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
fi

if has nsys; then
  # Nsight Systems over train-gpt -bench runs (NSYS_ROWS: ';'-separated
  # "name|flags", flags optionally led by VAR=value): where the last full
  # step's time goes (bench/nsys_step.py: streams' busy time, copies,
  # the compute stream's gaps, the host's API calls).
  NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
  if [ -z "$NSYS" ]; then say "nsys: not on this machine"; else
    b=${OFFLOAD_BUDGET:-5.29GiB}
    IFS=';' read -r -a rows <<< "${NSYS_ROWS:-fp32-keep2|-config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -checkpoint-offload-keep 2 -device-budget $b -bench-warmup 6;fp32-sel|-config gpt2 -precision fp32 -checkpoint selective -device-budget $b -bench-warmup 6;medium-exp|STRATA_EXPANDABLE_SEGMENTS=1 -config gpt2-medium -precision bf16 -attention fused -head fused -device-budget 4GiB -checkpoint blocks -bench-warmup 25}"
    for row in "${rows[@]}"; do
      name=${row%%|*} envs=() flags=()
      for w in ${row#*|}; do
        case $w in *=*) if [ ${#flags[@]} -eq 0 ]; then envs+=("$w"); else flags+=("$w"); fi ;; *) flags+=("$w") ;; esac
      done
      start=$(date +%s)
      env ${envs[@]+"${envs[@]}"} timeout 150 "$NSYS" profile -t cuda --cuda-memory-usage=false -o "$L/nsys-$name" --force-overwrite true \
        .gpu/train-gpt -device cuda -bench -steps 6 "${flags[@]}" > "$L/nsys-$name.jsonl" 2> "$L/nsys-$name.log"
      say "[nsys $name] exit $? in $(( $(date +%s) - start ))s; $(jfields "$L/nsys-$name.jsonl" tok_s step_ms)"
      "$NSYS" export --type sqlite -o "$L/nsys-$name.sqlite" --force-overwrite true "$L/nsys-$name.nsys-rep" > /dev/null 2>&1
      python3 bench/nsys_step.py "$L/nsys-$name.sqlite" 2>&1 | head -45 | tee -a "$OUT/summary.txt"
      rm -f "$L/nsys-$name.sqlite" "$L/nsys-$name.nsys-rep"
    done
  fi
fi

if has keepauto; then
  # The timed keep search (55453c8's successor) and the expandable
  # segments' moves by kernel.
  b=${OFFLOAD_BUDGET:-5.29GiB}
  off2 fp32-none -config gpt2 -precision fp32 -bench-warmup 3
  off2 fp32-keep2 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -checkpoint-offload-keep 2 -device-budget "$b" -bench-warmup 6
  off2 fp32-keepauto -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -device-budget "$b" -bench-warmup 24
  for k in 2 3 auto; do
    off2 fp32-keep$k-exp STRATA_EXPANDABLE_SEGMENTS=1 -config gpt2 -precision fp32 -checkpoint selective -checkpoint-offload -checkpoint-offload-keep $k -device-budget "$b" -bench-warmup 24
  done
  keep_table keepauto 24 auto
fi

if has overlapab; then
  # The overlapped optimizer update against the plain one, alternating:
  # gpt2-medium bf16 under 4 GiB (optimizer state offloaded).
  for i in $(seq "${OVERLAP_RUNS:-2}"); do
    for ov in true false; do
      start=$(date +%s)
      timeout 120 .gpu/memstrategies -config gpt2-medium -precision bf16 -steps 6 -warmup 25 -strategies hybrid -attention fused \
        -budget 4GiB -overlap=$ov -png "" > "$L/overlap-$ov-$i.jsonl" 2> "$L/overlap-$ov-$i.log"
      say "memstrategies gpt2-medium hybrid 4 GiB -overlap=$ov (run $i): exit $? in $(( $(date +%s) - start ))s"
      cat "$L/overlap-$ov-$i.jsonl" >> "$res"
      grep -E '^\| hybrid' "$L/overlap-$ov-$i.log" | cut -c1-200 | tee -a "$OUT/summary.txt"
    done
  done
fi

if has trainbudget; then
  # train-gpt itself under -device-budget: gpt2-medium bf16 with block
  # checkpointing, the fused head and fused attention, 40 steps on the
  # repository's sources (GPT-2 tokens), without and with a 4 GiB budget;
  # the losses must agree step by step (placement changes where bytes
  # live, not the arithmetic), and they fall.
  find . -name '*.go' -o -name '*.md' | grep -v '^./.gpu' | sort | xargs cat > /tmp/strata-src.txt
  for b in "" 4GiB; do
    start=$(date +%s)
    timeout 200 .gpu/train-gpt -device cuda -config gpt2-medium -precision bf16 -attention fused -checkpoint blocks -head fused \
      -data /tmp/strata-src.txt -tokenizer gpt2 -steps 40 -warmup 10 -eval-every 0 -sample 0 -quiet -out "" -progress-every 0 \
      -loss-log "$L/medium-budget-${b:-none}.jsonl" ${b:+-device-budget $b -placement-plan} > "$L/medium-budget-${b:-none}.log" 2>&1
    say "train-gpt gpt2-medium bf16 budget ${b:-none}: exit $? in $(( $(date +%s) - start ))s; $(grep -E '^step|tok/s' "$L/medium-budget-${b:-none}.log" | tail -1)"
    grep -E '^(device|offload|total|limit) |spilled to|device budget' "$L/medium-budget-${b:-none}.log" | head -8 | tee -a "$OUT/summary.txt"
  done
  python3 - "$L/medium-budget-none.jsonl" "$L/medium-budget-4GiB.jsonl" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
n = min(len(a), len(b))
print(json.dumps({"check": "medium_losses_with_and_without_budget", "steps": n, "first": [a[0], b[0]] if n else None,
                  "last": [a[n-1], b[n-1]] if n else None, "max_abs_diff": max((abs(x - y) for x, y in zip(a, b)), default=None)}))
PY
fi

if has benchbudget; then
  # BENCH_CONFIGS: ';'-separated train-gpt flags, each optionally led by
  # VAR=value environment settings.
  IFS=';' read -r -a configs <<< "${BENCH_CONFIGS:--checkpoint none;-checkpoint auto -device-budget 4GiB;-checkpoint auto -device-budget 4GiB -overlap-optimizer;-checkpoint blocks -device-budget 4GiB -overlap-optimizer}"
  n=0
  for args in "${configs[@]}"; do
    start=$(date +%s)
    n=$((n + 1))
    name=$n$(echo "$args" | tr -c 'a-zA-Z0-9\n' '_')
    envs=(); flags=()
    for w in $args; do
      case $w in *=*) if [ ${#flags[@]} -eq 0 ]; then envs+=("$w"); else flags+=("$w"); fi ;; *) flags+=("$w") ;; esac
    done
    env ${envs[@]+"${envs[@]}"} timeout 200 .gpu/train-gpt -device cuda -config gpt2-medium -precision bf16 -attention fused -head fused -bench -steps 10 \
      -bench-warmup "${BENCH_WARM:-25}" ${flags[@]+"${flags[@]}"} > "$L/bench-medium$name.jsonl" 2> "$L/bench-medium$name.log"
    say "train-gpt -bench gpt2-medium bf16 $args: exit $? in $(( $(date +%s) - start ))s"
    grep -E '^placement:|still choosing' "$L/bench-medium$name.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
    cat "$L/bench-medium$name.jsonl" >> "$res"
    jfields "$L/bench-medium$name.jsonl" tok_s checkpoint checkpoint_every device_budget timed_spills peak_mib_by_tier loss | tee -a "$OUT/summary.txt"
  done
fi

bench_row() { # name, train-gpt args: one -bench line into $res and a summary line
  local name=$1; shift
  timeout 150 .gpu/train-gpt -device cuda -bench "$@" > "$L/row-$name.jsonl" 2> "$L/row-$name.log"
  local rc=$?
  cat "$L/row-$name.jsonl" >> "$res"
  say "[$name] train-gpt -bench $*: exit $rc; $(jfields "$L/row-$name.jsonl" tok_s step_ms peak_mib kernel_launches_per_step attention loss phases)"
}

if has fp32attn; then
  for i in $(seq "${FUSED_RUNS:-2}"); do
    for a in plain fused; do
      bench_row "fp32-$a-$i" -config gpt2 -precision fp32 -attention $a -steps 10 -bench-warmup 3
    done
  done
fi

if has batchscale; then
  for b in 8 16 8; do
    bench_row "bf16-b$b-$RANDOM" -config gpt2 -precision bf16 -batch $b -steps 20 -bench-warmup 5
  done
fi

if has link; then
  # The bus by copy engine (examples/bench-link): pinned and unified host
  # memory, each direction and both at once.
  timeout 120 .gpu/bench-link -size "${LINK_SIZE:-1GiB}" -reps 5 > "$L/bench-link.jsonl" 2> "$L/bench-link.txt"
  say "bench-link: exit $?"; cat "$L/bench-link.jsonl" >> "$res"; tee -a "$OUT/summary.txt" < "$L/bench-link.txt"
fi

if has linkab; then
  # The optimizer update over offloaded state with the embedded kernels
  # and with the ones compiled here (FRESH_KERNELS=1), alternating:
  # memstrategies' hybrid on gpt2-medium bf16 under 4 GiB reports the
  # update's time and the bus bandwidth it reached.
  for i in 1 2; do
    for k in embedded fresh; do
      kv=${STRATA_KERNELS:-}; [ $k = embedded ] && kv=
      start=$(date +%s)
      STRATA_KERNELS=$kv timeout 120 .gpu/memstrategies -config gpt2-medium -precision bf16 -steps 4 -warmup 25 -strategies hybrid \
        -budget 4GiB -png "" > "$L/link-$k-$i.jsonl" 2> "$L/link-$k-$i.log"
      say "memstrategies gpt2-medium hybrid 4 GiB, $k kernels (run $i): exit $? in $(( $(date +%s) - start ))s; $(jfields "$L/link-$k-$i.jsonl" tok_s optimizer_ms offloaded_optimizer_bytes link_gb_s checkpoint peak_device_mib)"
      cat "$L/link-$k-$i.jsonl" >> "$res"
    done
  done
fi

if has hostab; then
  # The host's share of a gpt2 bf16 step: the Go collector off and lazier
  # against the default, alternating, and a step whose gradients are
  # clipped (-clip 1e-3: every step scales them, one launch).
  for i in 1 2; do
    bench_row "gc-default-$i" -config gpt2 -precision bf16 -steps 20 -bench-warmup 5
    (export GOGC=off; bench_row "gc-off-$i" -config gpt2 -precision bf16 -steps 20 -bench-warmup 5)
    (export GOGC=400; bench_row "gc-400-$i" -config gpt2 -precision bf16 -steps 20 -bench-warmup 5)
  done
  bench_row clipped -config gpt2 -precision bf16 -steps 20 -bench-warmup 5 -clip 1e-3
fi

if has torch && [ -f .gpu/torch_gpt.py ]; then
  start=$(date +%s)
  for conf in "" "expandable_segments:True"; do
    PYTORCH_CUDA_ALLOC_CONF=$conf timeout 200 python3 bench/torch_capped.py .gpu >> "$L/torch-capped.jsonl" 2>> "$L/torch-capped.txt"
  done
  say "pytorch capped/unconstrained: exit $? in $(( $(date +%s) - start ))s"
  cat "$L/torch-capped.jsonl" >> "$res"; cut -c1-300 "$L/torch-capped.jsonl" | tee -a "$OUT/summary.txt"
fi
say "done"
