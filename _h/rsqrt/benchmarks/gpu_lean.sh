#!/usr/bin/env bash
# Issue 12, lean derivative kernels (enzyme/lean.py), on the GPU in one device call of about 4 minutes,
# from the repository root: the JAX GPU tests (the JVP/transpose rules now run the lean kernels), then
# the RAJAPerf kernels that have derivatives (lcals_diff_predict left out: 56 s alone at 2^26; the
# slowest adjoints first, so a spent budget cuts the reductions) at 10^6 and 2^26, timing the lean
# JVP/adjoint (what the JAX rules run) and the full ones (ado.jvp/ado.vjp defaults) with their
# array-byte ratios. Results under $OUT/lean: log.txt, tests.txt,
# bench/{report.md,results.csv,results.json}.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="$OUT/lean"
mkdir -p "$out"
log="$out/log.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$log" 2>&1
echo "=== gpu tests $(date -u +%T)" >> "$log"
timeout 60 python3 -m pytest -q -p no:cacheprovider -rfE tests/jax/test_gpu.py tests/gpu/test_lean_cuda.py \
  > "$out/tests.txt" 2>&1
echo "pytest exit $?" >> "$out/tests.txt"
echo "=== run.py $(date -u +%T)" >> "$log"
timeout 175 python3 benchmarks/run.py --only rajaperf --rajaperf-budget 140 --big-reps 10 --out "$out/bench" \
  --rajaperf-kernels lcals_eos lcals_hydro_1d basic_if_quad stream_copy stream_add stream_mul stream_triad \
  basic_daxpy basic_init3 basic_muladdsub lcals_planckian lcals_first_diff stream_dot basic_pi_reduce basic_trap_int \
  >> "$log" 2>&1
echo "=== run.py exit $? $(date -u +%T)" >> "$log"
tail -3 "$out/tests.txt"
grep -E "adjoint|JVP|bytes|jax\.(jvp|vjp)" "$out/bench/report.md" 2>/dev/null | head -24
grep -E "===" "$log"
