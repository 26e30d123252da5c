set -u
pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export XLA_PYTHON_CLIENT_PREALLOCATE=false
R=$OUT/d; mkdir -p $R
export PYTHONPATH=.
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep "Model name"; nproc; uptime; } > $R/environment.txt 2>&1
# 1. GPU tests of the merged tree (the three memory-filling tests excluded; clang-dependent folders not run: no clang here)
PYTHONPATH=.:/tmp/site timeout 150 python -m pytest -n 12 -q -p no:cacheprovider tests/gpu tests/runtime tests/codegen tests/jax tests/optimize tests/research tests/ad/test_reverse_gpu_code.py \
   --deselect tests/runtime/test_memory.py::test_out_of_memory_empties_the_cache_then_retries \
   --deselect tests/runtime/test_memory.py::test_out_of_memory_leaks_nothing > $R/tests.txt 2>&1
echo "tests rc=$?" >> $R/environment.txt
grep -E "passed|failed" $R/tests.txt | tail -1
grep -E "^(FAILED|ERROR)" $R/tests.txt | head -20
# 2. tiny launches on CUDA (cudalaunch merged) and on this machine's idle host CPU
for k in 1 2; do
  timeout 40 python -m adoffload.testing.launch_timing --device cuda --rounds 9 2>/dev/null | tail -1 >> $R/launch_timing_cuda.jsonl
done
cut -c1-420 $R/launch_timing_cuda.jsonl
# 3. LJ38 main job cold, tiered assembly on (default) and off, same machine, interleaved
for seed in 1 3; do for tiered in 1 0; do
  ADOFFLOAD_PTXAS_TIERED=$tiered ADOFFLOAD_CACHE_DIR=$(mktemp -d) CUDA_CACHE_DISABLE=1 timeout 60 python examples/chemistry/lj_clusters.py --device cuda --atoms 38 --until-reached --time-limit 40 --seed $seed --out /tmp/o > $R/lj38_seed${seed}_tiered$tiered.txt 2>&1
  echo "seed $seed tiered $tiered: $(grep -E 'reached the published' $R/lj38_seed${seed}_tiered$tiered.txt)"
done; done
# 4. the research example on the GPU (if its script is here)
[ -f tmp_probe/gpu_research.sh ] && OUT=$R/research PYTHONPATH=.:/tmp/site timeout 100 bash tmp_probe/gpu_research.sh > $R/research.log 2>&1; tail -15 $R/research.log 2>/dev/null
cat $R/environment.txt
cd $OUT && tar czf d.tgz d && rm -rf d
