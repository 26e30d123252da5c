#!/usr/bin/env bash
# Optional, CPU only (no GPU used): clean timings of the CI suite's heavy AD test files on the
# otherwise idle device host, each lane pinned to 2 cores as CI has, lanes side by side.
# Run from the repository root: bash benchmarks/gpu_ci.sh ; results in $OUT/ci/*.txt (pytest
# output with --durations) and $OUT/ci/*.time (wall, user, sys seconds). About 3-4 minutes.
set -u
OUT=${OUT:-/tmp/adoffload-out}
mkdir -p "$OUT/ci"
export JAX_PLATFORMS=cpu CUDA_VISIBLE_DEVICES="" PYTHONPATH=.
export ADOFFLOAD_CACHE_DIR="$OUT/ci/cache"        # cold caches, as on a fresh CI machine
lane() {                                           # lane CORES NAME PYTEST-ARGS...
    local cores=$1 name=$2
    shift 2
    ( TIMEFORMAT="%R s wall, %U s user, %S s sys"
      { time taskset -c "$cores" python -m pytest -q -p no:cacheprovider --durations=15 "$@" \
            > "$OUT/ci/$name.txt" 2>&1 ; } 2> "$OUT/ci/$name.time" ) &
}
lane 0,1 differential tests/ad/test_differential_c.py          # its default: 600 programs x 4 levels
lane 2,3 foreign_rust_memory tests/ad/test_foreign_rust.py tests/ad/test_foreign_memory.py
lane 4,5 foreign_c tests/ad/test_foreign_c.py tests/ad/regressions
lane 6,7 ir tests/ir
lane 8,9 ad_kernels tests/ad/test_kernels.py tests/ad/test_properties.py tests/ad/test_no_speculative_loads.py
wait
head -n 3 "$OUT"/ci/*.time
