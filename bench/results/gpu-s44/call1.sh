T0=$(date +%s); nvidia-smi -L
if ! nvidia-smi -L | grep -q H200; then echo "not an H200: nothing to measure"; exit 0; fi
cd .gpu && tar xJf b1.tar.xz && rm b1.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
pair_process "1"; pair_process "2"; pair_process "3"; pair_process "pinned" taskset -c 3
(cd memory && taskset -c 3 timeout 100 ../.gpu/memory.test -test.run TestPairWindows -pair-windows 300 -pair-mixed 2>&1 | grep pair-windows; taskset -c 5 timeout 100 ../.gpu/memory.test -test.run TestPairWindows -pair-windows 300 -pair-mixed 2>&1 | grep pair-windows) | tee $OUT/windows.txt
cd $OUT && tar cJf results.tar.xz $(ls | grep -v -E '^results') && ls | grep -v -E '^results' | xargs rm -f; ls -la $OUT
echo total $(( $(date +%s)-T0 ))s
