#!/usr/bin/env bash
# Host-side cold-compile measurements of the LJ38 optimizer kernels for CUDA (no GPU needed).
set -u
PY=/work/main/.venv/bin/python
OUT=${1:-/tmp/host_coldcompile}
mkdir -p "$OUT"
echo "== $(date -u); $(nproc) cores; $(uptime | sed 's/.*load/load/') =="
echo "-- kernel generation + front end + AD, and codegen to PTX (sm_90, JAX's options), empty cache --"
for tree in /work/main "$PWD"; do for m in lbfgs fire; do
  echo -n "$(basename $tree) "; ADOFFLOAD_CACHE_DIR=$(mktemp -d) PYTHONPATH=$tree $PY tmp_probe/profile_kernel.py $m
done; done
for m in lbfgs fire; do ADOFFLOAD_CACHE_DIR=$(mktemp -d) PYTHONPATH=. $PY tmp_probe/dump_ptx.py $m; cp /tmp/$m.ptx "$OUT/"; done
PTXAS=$(PYTHONPATH=. $PY -c "from adoffload.codegen.gpu.tools import find_ptxas; print(find_ptxas())")
echo "-- ptxas ($PTXAS, $($PTXAS --version | tail -1)) on the PTX --"
for m in lbfgs fire; do for o in 3 1; do
  s=$(date +%s.%N); /usr/bin/time -o "$OUT/cpu.txt" -f "%U %S" $PTXAS -arch=sm_90 -O$o -v -o "$OUT/$m-O$o.cubin" /tmp/$m.ptx > "$OUT/ptxas_$m-O$o.txt" 2>&1; e=$(date +%s.%N)
  echo "$m -O$o: $(awk "BEGIN{printf \"%.2f\", $e - $s}") s (CPU $(awk '{printf "%.2f", $1 + $2}' "$OUT/cpu.txt") s), $(grep -o 'Used [0-9]* registers' "$OUT/ptxas_$m-O$o.txt"), $(grep -o '[0-9]* bytes spill stores' "$OUT/ptxas_$m-O$o.txt"), cubin $(stat -c %s "$OUT/$m-O$o.cubin") bytes"
done; done
echo "-- both kernels' ptxas -O3: one after the other, and as two processes at once --"
for r in 1 2; do
  s=$(date +%s.%N); $PTXAS -arch=sm_90 -o /tmp/a.cubin /tmp/lbfgs.ptx; $PTXAS -arch=sm_90 -o /tmp/b.cubin /tmp/fire.ptx; m=$(date +%s.%N)
  $PTXAS -arch=sm_90 -o /tmp/a.cubin /tmp/lbfgs.ptx & $PTXAS -arch=sm_90 -o /tmp/b.cubin /tmp/fire.ptx; wait; e=$(date +%s.%N)
  echo "serial $(awk "BEGIN{printf \"%.2f\", $m - $s}") s, parallel $(awk "BEGIN{printf \"%.2f\", $e - $m}") s"
done
echo "-- LLVM builds of both kernels in two threads (llvmlite's global lock) --"
ADOFFLOAD_CACHE_DIR=$(mktemp -d) PYTHONPATH=. $PY tmp_probe/gil_probe.py
echo "== end $(date -u); $(uptime | sed 's/.*load/load/') =="
