set -u
T0=$(date +%s); nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
lscpu | grep -E 'Model name|L2|L3|Hypervisor' | head -5
cd .gpu && tar xJf all.tar.xz && rm all.tar.xz && chmod +x * && cd ..
unset STRATA_KERNELS STRATA_PLAN_STEPS
. bench/gpu-calls.sh
pair_process "as placed 1"
pair_process "pinned 3" taskset -c 3
pair_process "pinned 7" taskset -c 7
echo "pairs done at $(( $(date +%s)-T0 ))s"
echo total $(( $(date +%s)-T0 ))s
