set -u
T0=$(date +%s); nvidia-smi -L; echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; lscpu | grep -E 'L2|MHz' | head -3
cd .gpu && tar xJf v.tar.xz && rm v.tar.xz && chmod +x * && cd ../memory
one() { # label prefix... : one run of the mixed pair
  local v=$1; shift
  "$@" ../.gpu/$v.test -test.run TestPairWindows -pair-windows 60 -pair-mixed | grep ' min ' | sed -E "s/^pair-windows +mixed +/$v /; s/ ns.pair.*//"
}
for pin in "taskset -c 3" "taskset -c 11" ""; do
  echo "## ${pin:-as placed}"
  for r in 1 2 3 4 5 6 7 8 9 10 11 12; do
    for v in base plainU lite nostats plainU_nostats; do
      echo "r$r $(one $v $pin)"
    done
  done
done | tee $OUT/ab.txt
echo total $(( $(date +%s)-T0 ))s
