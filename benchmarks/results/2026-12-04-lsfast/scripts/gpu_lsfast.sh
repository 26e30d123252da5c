#!/bin/bash
# lsfast on a GPU: the old (main's) and new least_squares LM kernels of the decay fit, timed alternately in
# one process (numpy in and out, transfers included, the same for both), results compared; their sm_90
# PTX and `ptxas -v` (registers, stack frame, spills); and the fits benchmark on cuda.
# Run from the repo root: OUT=/some/dir bash benchmarks/results/2026-12-04-lsfast/scripts/gpu_lsfast.sh
set -x
export PYTHONPATH=.
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/gpu.txt" 2>&1
python benchmarks/results/2026-12-04-lsfast/scripts/inprocess_ab.py 100000 7 cuda "$OUT" > "$OUT/ab_100k.txt" 2>&1
python benchmarks/results/2026-12-04-lsfast/scripts/inprocess_ab.py 1000000 5 cuda > "$OUT/ab_1m.txt" 2>&1
for f in old new; do ptxas -arch=sm_90 -v "$OUT/lm_$f.ptx" -o "$OUT/lm_$f.cubin" > "$OUT/ptxas_$f.txt" 2>&1; done
rm -f "$OUT"/*.cubin
timeout 500 python -m benchmarks optimize --cases fits --device cuda --out "$OUT/fits" > "$OUT/fits.log" 2>&1
tail -n 5 "$OUT"/ab_*.txt "$OUT"/ptxas_*.txt
