#!/usr/bin/env bash
# Tiered ptxas assembly on one GPU (issue 32: LJ38 <= 5 s cold, compile included). Needs no clang, no network.
# Run from the repository root:  PYTHONPATH=. bash tmp_probe/gpu_tiered.sh   (results: $OUT/tiered.tar.gz)
#  1. tests/codegen/test_cubin.py, tests/codegen/test_tiered_cubin.py, tests/gpu/test_tiered_cubin_gpu.py
#     (the last: numpy and JAX launches run -O1 first, then -O3, bit-identical)
#  2. the PTX of the LJ38 optimizer kernels: every f32/f64 add/sub/mul carries .rn (ptxas never contracts
#     those at any -O level; fma contraction is LLVM's, in the PTX)
#  3. the LJ38 main job cold (fresh adoffload cache, CUDA_CACHE_DISABLE=1), seeds 0-3, tiering on (default)
#  4. per-minimization times of 16384 LJ38 walkers, cold cache, one process: FIRE and L-BFGS tiered,
#     FIRE with ADOFFLOAD_PTXAS_OPT=1 (all -O1) and ADOFFLOAD_PTXAS_TIERED=0 (all -O3) for reference
set -u
OUT=${OUT:-/tmp/tiered_out}
RES=$(mktemp -d)
PY=${PYTHON:-python}
export PYTHONPATH=${PYTHONPATH:-.}
export CUDA_CACHE_DISABLE=1
LOG="$RES/summary.txt"
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }
BEGAN=$(date +%s)
say "== $(date -u) $(git rev-parse --short HEAD 2>/dev/null) cpus $(nproc) load $(cut -d' ' -f1-3 /proc/loadavg) =="
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"

say "--- 1. tests ---"
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 120 $PY -m pytest -q -p no:cacheprovider -n 0 tests/codegen/test_cubin.py \
    tests/codegen/test_tiered_cubin.py tests/gpu/test_tiered_cubin_gpu.py > "$RES/pytest.txt" 2>&1
say "pytest rc $? : $(grep -E '[0-9]+ (passed|failed)' "$RES/pytest.txt" | tail -1)"
grep -E "^(FAILED|ERROR)" "$RES/pytest.txt" | head -20 | tee -a "$LOG"

say "--- 2. rounding modifiers in the LJ38 optimizer PTX ---"
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 60 $PY - <<'PYEOF' 2>&1 | tee -a "$LOG"
import re, numpy as np
from adoffload.chemistry.kernels import lj_cluster_energy
from adoffload.optimize.api import minimize_call
for method in ("fire", "lbfgs"):
    x0 = np.zeros((16384, 114))
    opts = {"dt_start": 0.005, "dt_max": 0.05, "max_step": 0.1, "group": 3} if method == "fire" else {"maxcor": 6}
    kernel = minimize_call(lj_cluster_energy, x0, (1.0, 1.0), method, None, 800, opts, "probe", False)[0]
    ptx = kernel.compiled("nvptx", arch="sm_90").ptx
    bare = re.findall(r"\b(?:add|sub|mul)(?:\.ftz)?\.f(?:32|64)\b", ptx)
    rn = re.findall(r"\b(?:add|sub|mul)\.rn(?:\.ftz)?\.f(?:32|64)\b", ptx)
    print(f"{method}: {len(rn)} add/sub/mul with .rn, {len(bare)} without; {len(re.findall(r'fma.rn', ptx))} fma.rn "
          "(LLVM's: contraction or libdevice)")
PYEOF

say "--- 3. LJ38 main job, cold ---"
for S in 0 1 2 3; do
    t0=$(date +%s.%N)
    ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 60 $PY examples/chemistry/lj_clusters.py --device cuda --atoms 38 \
        --until-reached --time-limit 40 --seed $S --out /tmp/o > "$RES/lj38_seed$S.txt" 2>&1
    rc=$?
    say "seed $S rc $rc wall $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s"
    grep -E "reached the published|^time |stopped after|Error|error" "$RES/lj38_seed$S.txt" | head -5 | tee -a "$LOG"
done

say "--- 4. per-minimization times, 16384 LJ38 walkers, cold cache ---"
RUN=0
timing() {   # timing METHOD CALLS [env...]
    local method=$1 calls=$2; shift 2
    RUN=$((RUN + 1))
    env "$@" ADOFFLOAD_CACHE_DIR="$(mktemp -d)" timeout 60 $PY tmp_probe/gpu_tiered_timing.py "$method" "$calls" \
        "$RES/timing.jsonl" > "$RES/timing${RUN}_${method}.txt" 2>&1
    say "$method $* (rc $?):"
    $PY - "$RES/timing${RUN}_${method}.txt" <<'PYEOF' | tee -a "$LOG"
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        print(f"  call {r['call']:2d}: {r['seconds']:.3f} s (at {r['since_start']:.1f} s)  upgrades {r['upgrades']}/"
              f"{r['tiered']} tiered, failures {r['upgrade_failures']}, ptxas runs {r['ptxas_runs']}, best {r['best']:.4f}")
    elif "Error" in line or "error" in line:
        print("  " + line.rstrip())
PYEOF
}
timing fire 12
timing lbfgs 8
timing fire 6 ADOFFLOAD_PTXAS_OPT=1
timing fire 6 ADOFFLOAD_PTXAS_TIERED=0

say "== total $(( $(date +%s) - BEGAN )) s =="
mkdir -p "$OUT"
tar czf "$OUT/tiered.tar.gz" -C "$RES" .
ls -la "$OUT"
