#!/usr/bin/env bash
# The second CUDA hunt on the GPU (under 4 minutes), from the repository root, with .device_cache carried:
#   bash benchmarks/gpu_cudahunt2.sh        (writes $OUT/cudahunt2/pytest.txt)
# The GPU machine has no clang: fill the cache where clang is, with the same ADOFFLOAD_CACHE_DIR, by running
#   ADOFFLOAD_CACHE_DIR=$PWD/.device_cache ADOFFLOAD_CUDA_HUNT=all PYTHONPATH=. python -m pytest -q \
#       tests/foreign_cuda/test_cuda_hunt2.py
# (this branch changes adoffload/foreign_cuda/ado_cuda.h, which keys every cached clang IR anew: re-warm the
# other CUDA sources too, benchmarks/warm_clang_cache.py and the tests/foreign_cuda folder).
# Runs every case on the host and its GPU variants (test_on_the_gpu_as_on_the_host_and_both_oracles: primal
# against the host, JVP against differences and VJP against JVP on the device; all_threads_store_result and
# same_value_everywhere check the reverse of a store many threads make, which only a GPU runs concurrently).
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" ADOFFLOAD_CACHE_DIR="$PWD/.device_cache"
mkdir -p "$OUT/cudahunt2"
ADOFFLOAD_CUDA_HUNT=all timeout 220 python3 -m pytest -q -p no:cacheprovider -rfEs \
    tests/foreign_cuda/test_cuda_hunt2.py > "$OUT/cudahunt2/pytest.txt" 2>&1
echo "pytest exit $?" >> "$OUT/cudahunt2/pytest.txt"
tail -15 "$OUT/cudahunt2/pytest.txt"
