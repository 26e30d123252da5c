#!/usr/bin/env bash
# Cold compile of the LJ38 main job on one GPU (issue 32): before (driver JIT of the PTX, no compile-ahead)
# and after (ptxas cubin + compile-ahead), L-BFGS and FIRE, each run with an EMPTY adoffload compile cache
# and the driver's JIT cache disabled (CUDA_CACHE_DISABLE=1: what a fresh machine has), then the compile
# breakdown of one run each way (tmp_probe/gpu_coldcompile_run.py). Needs no clang, no network.
# Run from the repository root:  PYTHONPATH=. bash tmp_probe/gpu_coldcompile.sh   (results in $OUT)
set -u
OUT=${OUT:-/tmp/coldcompile_out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
export PYTHONPATH=${PYTHONPATH:-.}
export CUDA_CACHE_DISABLE=1
BEGAN=$(date +%s)
LOG="$OUT/summary.txt"
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }

say "== $(date -u) $(git rev-parse --short HEAD 2>/dev/null) =="
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
$PY - <<'EOF' 2>&1 | tee -a "$LOG"
from adoffload.codegen.gpu import tools, cubin
try:
    p = str(tools.find_ptxas()); print("ptxas:", p, "|", cubin.ptxas_version(p))
except Exception as e:
    print("ptxas: none:", e)
print("cpus:", __import__("os").cpu_count())
EOF

# A: driver JIT, no compile-ahead (the code before this branch's changes to the load path and the example;
#    the backend self-checks before the search are jitted in both, see the results README)
# B: ptxas cubin + compile-ahead (the default now)
run() {   # run LABEL MINIMIZER [env...]
    local label=$1 minimizer=$2; shift 2
    local cache; cache=$(mktemp -d)
    local extra=""
    [ "$label" = A ] && extra="--no-compile-ahead"
    [ "$label" = C ] && extra=""
    local t0; t0=$(date +%s.%N)
    env "$@" ADOFFLOAD_CACHE_DIR="$cache" timeout 75 $PY examples/chemistry/lj_clusters.py --device cuda --atoms 38 \
        --until-reached --time-limit 60 --minimizer "$minimizer" $extra --out "$OUT/plots_${label}_${minimizer}" \
        > "$OUT/run_${label}_${minimizer}.txt" 2>&1
    local rc=$?
    local t1; t1=$(date +%s.%N)
    say "--- $label $minimizer (rc $rc, wall $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s; $*) ---"
    grep -E "reached the published|^time |stopped after|Error|error" "$OUT/run_${label}_${minimizer}.txt" | tee -a "$LOG"
    rm -rf "$cache"
}

run A lbfgs ADOFFLOAD_PTXAS=0
run B lbfgs ADOFFLOAD_PTXAS=1
run A fire ADOFFLOAD_PTXAS=0
run B fire ADOFFLOAD_PTXAS=1

# the breakdown (timers on every compile stage; the example's clock starts after the runner's imports)
breakdown() {   # breakdown LABEL MINIMIZER [env...]
    local label=$1 minimizer=$2; shift 2
    local cache; cache=$(mktemp -d)
    local extra=""
    [ "$label" = A ] && extra="--no-compile-ahead"
    env "$@" ADOFFLOAD_CACHE_DIR="$cache" timeout 75 $PY tmp_probe/gpu_coldcompile_run.py "$OUT/breakdown_${label}_${minimizer}.json" -- \
        --device cuda --atoms 38 --until-reached --time-limit 60 --minimizer "$minimizer" $extra --out "$OUT/plots_bd" \
        > "$OUT/breakdown_${label}_${minimizer}.txt" 2>&1
    say "--- breakdown $label $minimizer (rc $?; $*) ---"
    grep -E "reached the published|^time " "$OUT/breakdown_${label}_${minimizer}.txt" | tee -a "$LOG"
    sed -n '/== compile breakdown/,/timeline/p' "$OUT/breakdown_${label}_${minimizer}.txt" | tee -a "$LOG"
    rm -rf "$cache"
}
for spec in "B lbfgs ADOFFLOAD_PTXAS=1" "A lbfgs ADOFFLOAD_PTXAS=0"; do
    if [ $(( $(date +%s) - BEGAN )) -gt 105 ]; then say "skipped breakdown $spec: past 105 s"; continue; fi
    breakdown $spec
done

# C: as B with ptxas at -O1 (6x shorter assembly on the host; the code differs: 134 registers and no spills
# against 255 and spills at -O3 for L-BFGS). Whether the search gets slower is the point of this run.
if [ $(( $(date +%s) - BEGAN )) -lt 115 ]; then run C lbfgs ADOFFLOAD_PTXAS=1 ADOFFLOAD_PTXAS_OPT=1
else say "skipped C (ptxas -O1): past 115 s"; fi

# ptxas alone on the two kernels' PTX, at each -O level (compile seconds only; the speed of the code is
# the lead's A/B: ADOFFLOAD_PTXAS_OPT=N runs the example with that level)
if [ $(( $(date +%s) - BEGAN )) -lt 135 ]; then
ADOFFLOAD_CACHE_DIR=$(mktemp -d) $PY - <<'EOF' 2>&1 | tee -a "$LOG"
import time, numpy as np
from adoffload.optimize import generate, lbfgs, fire
from adoffload.optimize.inputs import prepare
from adoffload.chemistry.kernels import lj_cluster_energy
from adoffload.jax import targets
from adoffload.codegen.gpu import cubin
specs, _ = prepare((1.0, 1.0), 8192, np.dtype(np.float64), "x", False)
for name, method, static in (("lbfgs", lbfgs, {"H": 6}), ("fire", fire, {"G": 3})):
    k = generate.minimize_kernel(lj_cluster_energy, method, 114, np.dtype(np.float64), specs, static)
    ptx = targets._gpu_compiled(k, "nvptx", "sm_90", targets.Variant()).ptx
    for opt in ("3", "1"):
        import os; os.environ[cubin.PTXAS_OPT_ENV] = opt
        t = time.perf_counter(); data = cubin.cubin_for(ptx, "sm_90", cache=False)
        print(f"ptxas -O{opt} {name}: {time.perf_counter() - t:.2f} s, cubin {len(data or b'')} bytes")
EOF
fi
say "total $(( $(date +%s) - BEGAN )) s"
