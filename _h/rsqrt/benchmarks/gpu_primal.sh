#!/usr/bin/env bash
# Issue 12, the primal rows (helper "primal", session 5): one device call of about 3 minutes, run from
# the repository root. GPU tests of row launches and versioned bounds checks, then the RAJAPerf primal
# rows (ours checked / unchecked / linear launch vs hand-written CUDA) for basic_nested_init,
# basic_pi_reduce, basic_trap_int, lcals_diff_predict, stream_dot and then the other kernels while the
# budget lasts, at 10^6 (timed 3 times) and 2^26. Results under $OUT/primal: log.txt, primal.md,
# primal.json. TESTS_TIMEOUT (40 s), BENCH_TIMEOUT (170 s) and PRIMAL_BUDGET (135 s) adjust it.
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
out="$OUT/primal"
mkdir -p "$out"
log="$out/log.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$log" 2>&1
echo "=== gpu tests $(date -u +%T)" >> "$log"
timeout "${TESTS_TIMEOUT:-40}" python3 -m pytest -q -p no:cacheprovider tests/gpu/test_primal_launch.py >> "$log" 2>&1
echo "=== gpu tests exit $? $(date -u +%T)" >> "$log"
timeout "${BENCH_TIMEOUT:-170}" python3 benchmarks/primal_rows.py --out "$out" --budget "${PRIMAL_BUDGET:-135}" >> "$log" 2>&1
echo "=== primal_rows exit $? $(date -u +%T)" >> "$log"
grep -E "passed|failed|error" "$log" | head -5
cat "$out/primal.md" 2>/dev/null
grep -E "===" "$log"
