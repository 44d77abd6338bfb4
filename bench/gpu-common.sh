# Shared start of the GPU scripts (sourced, not run): gpu-hybrid.sh and
# gpu-profile.sh. Before sourcing, set L (the logs folder) and
# default_phases; the caller's arguments name the phases. It sets OUT
# (default /tmp/strata-gpu), res ($OUT/results.jsonl), has PHASE and
# say TEXT (to stdout and $OUT/summary.txt), tars $L into $OUT/logs.tgz on
# exit, unpacks .gpu/strata-gpu.tar.xz, records nvidia-smi and, with
# FRESH_KERNELS=1, compiles kernels/ there and runs on them.
# run_gpu_tests PKG... runs each package's test binary (.gpu/NAME.test)
# in its folder with STRATA_REQUIRE_GPU=1 and says what passed; jfields
# FILE KEY... prints fields of a program's last JSON line.
set -u
OUT=${OUT:-/tmp/strata-gpu}
mkdir -p "$OUT"
rm -rf "$L"; mkdir -p "$L"
res=$OUT/results.jsonl
trap 'tar -C "$L" -czf "$OUT/logs.tgz" .' EXIT
phases="${phases:-$default_phases}"
has() { case " $phases " in *" $1 "*) return 0;; esac; return 1; }
say() { echo "== $*" | tee -a "$OUT/summary.txt"; }
if [ -f .gpu/strata-gpu.tar.xz ]; then tar -C .gpu -xJf .gpu/strata-gpu.tar.xz; fi
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$L/nvidia-smi.txt"
# FRESH_KERNELS=1: compile kernels/ with the machine's nvcc (there is none
# here), run everything on that fatbin (STRATA_KERNELS) and bring it back
# as $OUT/kernels.fatbin, to commit with its source hash.
if [ -n "${FRESH_KERNELS:-}" ]; then
  if nvcc --threads 0 -fatbin -gencode arch=compute_90,code=sm_90 -gencode 'arch=compute_80,code=[sm_80,compute_80]' \
      -o "$OUT/kernels.fatbin" kernels/all.cu > "$L/nvcc.txt" 2>&1; then
    export STRATA_KERNELS=$OUT/kernels.fatbin
    say "kernels: built with $(nvcc --version | tail -1); every run below loads them"
  else
    say "kernels: nvcc FAILED; the embedded fatbin runs"; tail -20 "$L/nvcc.txt" | tee -a "$OUT/summary.txt"
  fi
fi

# jfields FILE KEY...: KEY=value for each key of FILE's last JSON line
# (phases, train-gpt -bench's, as name:device/host ms each).
jfields() {
  python3 - "$@" <<'PY' 2>/dev/null
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
out = []
for k in sys.argv[2:]:
    v = r.get(k)
    if k == "phases":
        v = ",".join("%s:%.2f/%.2f" % (p["name"].replace(" ", "_"), p["device_ms"], p["host_ms"]) for p in v or [])
    out.append("%s=%s" % (k, v))
print(" ".join(out))
PY
}

run_gpu_tests() {
  local pkg bin log start rc
  for pkg in "$@"; do
    bin=$PWD/.gpu/$(basename "$pkg").test log=$L/test-$(basename "$pkg").log
    [ -x "$bin" ] || { say "test $pkg: no binary"; continue; }
    start=$(date +%s)
    (cd "$pkg" && STRATA_REQUIRE_GPU=1 timeout 240 "$bin" -test.v -test.timeout 230s > "$log" 2>&1)
    rc=$?
    say "test $pkg: exit $rc in $(( $(date +%s) - start ))s; $(grep -c '^=== RUN' "$log") run, $(grep -c -- '--- SKIP' "$log") skipped, $(grep -c -- '--- FAIL' "$log") failed"
    grep -E -- '--- FAIL|panic:|collected without Release' "$log" | head -15 | tee -a "$OUT/summary.txt"
  done
}
