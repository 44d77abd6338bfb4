set -u
T0=$(date +%s); nvidia-smi -L; echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; lscpu | grep -E 'L2|MHz' | head -3
cd .gpu && tar xJf v.tar.xz && rm v.tar.xz && chmod +x * && cd ../memory
for r in 1 2 3; do
  for v in base nolock nostats biased biased0 v3; do
    b=$v; e=X=1; [ $v = biased0 ] && { b=biased; e=STRATA_LOCK_BIAS=0; }
    env $e taskset -c 3 ../.gpu/$b.test -test.run TestPairWindows -pair-windows 200 | grep 'min' | sed -E "s/^pair-windows +/$v r$r /; s/ ns.pair.*//"
  done
done | tee $OUT/ab.txt
for v in base biased; do env X=1 ../.gpu/$v.test -test.run TestPairWindows -pair-windows 200 -pair-mixed | grep min | sed "s/^/$v as placed: /"; done
../.gpu/biased.test -test.run 'Bias|Mutex' -test.count 1 2>&1 | tail -3
../.gpu/biased.test -test.run XXX -test.bench 'BenchmarkMutex' -test.benchtime 200ms 2>&1 | grep -E "^Benchmark" | head
../.gpu/base.test -test.run XXX -test.bench 'BenchmarkMutex' -test.benchtime 200ms 2>&1 | grep -E "^Benchmark" | head
echo total $(( $(date +%s)-T0 ))s
