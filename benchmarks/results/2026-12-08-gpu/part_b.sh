#!/bin/bash
# 2026-12-08, device call 2 (prepared; no device was lent in this session): the 10^6 decay fits on the
# GPU after the 2026-12-07/08 least-squares changes (scipy's xtol test on rejected trials; MINPACK's
# angle gradient test), against optimistix, the jnp Gauss-Newtons and scipy; then the user-kernel rows
# of issue 31 (unchanged code, a second measurement on whichever card comes).
export PYTHONPATH=. PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
R=$OUT/b; mkdir -p $R
{ date -u; nvidia-smi -L; nproc; cat /proc/loadavg; git log --oneline -1; } > $R/environment.txt 2>&1
ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 220 python -m benchmarks optimize --cases fits --device cuda --curves 1000000 \
    --fit-reps 3 --out $R/fits > $R/fits.log 2>&1
grep -A12 "per way" $R/fits/report.md | head -14
timeout 250 python -m benchmarks user_kernels --device cuda --out $R/user_kernels > $R/user_kernels.log 2>&1
tail -30 $R/user_kernels.log
cd $OUT && tar czf b.tgz b && rm -rf b
