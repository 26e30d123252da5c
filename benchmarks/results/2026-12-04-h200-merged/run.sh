set -u
pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export XLA_PYTHON_CLIENT_PREALLOCATE=false
R=$OUT/c; mkdir -p $R
export PYTHONPATH=.
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; uptime; git log -1 --format=%h 2>/dev/null; } > $R/environment.txt 2>&1
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 100 python -m benchmarks user_kernels --device cuda --potentials lj morse \
     --sides "ours: jax" "ours: ado.vjp on CuPy" "hand-written CUDA" --no-launches --reps 10 --out $R/suite > $R/suite.log 2>&1
echo "suite rc=$?" >> $R/environment.txt
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 30 python tmp_probe/kernel_times.py cuda 1000000 lj morse > $R/pieces.jsonl 2> $R/pieces.err
echo "pieces rc=$?" >> $R/environment.txt
for k in 1 2; do
  timeout 40 python -m adoffload.testing.launch_timing --device cuda --rounds 9 2>/dev/null | tail -1 >> $R/launch_timing_cuda.jsonl
  timeout 40 python -m adoffload.testing.launch_timing --device cpu --rounds 9 2>/dev/null | tail -1 >> $R/launch_timing_host.jsonl
done
cat /proc/loadavg >> $R/environment.txt
PYTHONPATH=.:/tmp/site timeout 200 python -m pytest -n 12 -q -p no:cacheprovider tests/gpu tests/runtime tests/codegen tests/jax tests/optimize tests/ad/test_reverse_gpu_code.py tests/research \
   --deselect tests/runtime/test_memory.py::test_out_of_memory_empties_the_cache_then_retries \
   --deselect tests/runtime/test_memory.py::test_out_of_memory_leaks_nothing > $R/tests.txt 2>&1
echo "tests rc=$?" >> $R/environment.txt
grep -E "passed|failed" $R/tests.txt | tail -3
grep -E "^(FAILED|ERROR)" $R/tests.txt | head -30
cat $R/environment.txt
sed -n '/^|/p' $R/suite/report.md 2>/dev/null | head -40
cat $R/launch_timing_cuda.jsonl | cut -c1-600
cd $OUT && tar czf c.tgz c && rm -rf c
