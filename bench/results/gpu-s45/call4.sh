T0=$(date +%s); nvidia-smi -L
if ! nvidia-smi -L | grep -q H200; then echo "not an H200: nothing run"; exit 0; fi
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; lscpu | grep -E 'MHz|L2|L3|Hypervisor' | head -6
cd .gpu && tar xJf b1.tar.xz && rm b1.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
pair_process "as placed 1"
pair_process "as placed 2"
pair_process "as placed 3"
pair_process "pinned 3" taskset -c 3
echo total $(( $(date +%s)-T0 ))s
