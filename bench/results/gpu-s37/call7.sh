cd .gpu && tar xJf b7.tar.xz && rm b7.tar.xz && chmod +x * && cd .. && nvidia-smi -L
unset STRATA_PLAN_STEPS
(cd memory && STRATA_REQUIRE_GPU=1 timeout 60 ../.gpu/memory.test -test.v -test.run 'TestGPUManagerPlansByDefault|TestGPUExpandable|TestGPURecordStream|Plan' > /tmp/m.log 2>&1; echo "memory TestGPU* rc $?: $(grep -c -- '--- PASS' /tmp/m.log) passed, $(grep -c -- '--- FAIL' /tmp/m.log) failed, $(grep -c -- '--- SKIP' /tmp/m.log) skipped")
for e in 0 1; do STRATA_PLAN_STEPS=$e timeout 50 .gpu/bench-alloc -reps 3 > /dev/null 2> /tmp/pair.md; echo "pair STRATA_PLAN_STEPS=$e rc $?"; grep -E '^\| (pool|manager|cuMemAllocAsync) ' /tmp/pair.md | grep -E "mixed|manager"; done
