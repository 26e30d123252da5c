#!/usr/bin/env bash
# Helper "tiles" (issue 13), one device call on one H200, under 4 minutes: the block benchmarks
# (register-tiled SGEMM and the 16x16 matmul with their VJPs at 1024/2048/4096 against cuBLAS and
# XLA, the block DOT, the shared-memory stencils and their adjoints against the plain kernel), the
# SGEMM at 4096 again with LLVM's -unroll-threshold=2000 (an experiment: does unrolling the
# adjoint's loop nest, which takes its register tiles out of local memory, pay?), then the
# tests/blocks GPU tests. Results under $OUT/tiles/: blocks.{json,csv}, unroll2000/blocks.{json,csv},
# tests_blocks.txt, log.txt. Run from the repository root:  bash benchmarks/gpu_tiles.sh
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false      # JAX takes memory as it goes; our runtime and CUDA share the GPU
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
o="$OUT/tiles"
mkdir -p "$o"
log="$o/log.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$log" 2>&1
echo "=== blocks $(date -u +%T)" >> "$log"
timeout 120 python3 benchmarks/blocks.py --out "$o" --reps 10 >> "$log" 2>&1
echo "=== blocks exit $? $(date -u +%T)" >> "$log"
ADOFFLOAD_CACHE_DIR=/tmp/adoffload-unroll2000 timeout 35 python3 benchmarks/blocks.py --out "$o/unroll2000" --reps 10 \
  --only matmul --matmul-sizes 4096 --matmul-vjp-sizes 4096 --unroll-threshold 2000 >> "$log" 2>&1
echo "=== unroll2000 exit $? $(date -u +%T)" >> "$log"
timeout 80 python3 -m pytest -q -p no:cacheprovider tests/blocks > "$o/tests_blocks.txt" 2>&1
echo "=== tests/blocks exit $? $(date -u +%T)" >> "$log"
tail -3 "$o/tests_blocks.txt"
grep -E "===|Error|error" "$log" | tail -20
python3 - "$o" <<'PY'
import json, sys
for path in (f"{sys.argv[1]}/blocks.json", f"{sys.argv[1]}/unroll2000/blocks.json"):
    try:
        rows = json.load(open(path))["rows"]
    except Exception as exc:
        print(path, "unreadable:", exc)
        continue
    for r in rows:
        keys = ("ratio", "vjp_ratio", "speedup_shared", "vjp_speedup_shared", "speedup_shared16",
                "vjp_speedup_shared16", "ratio_vs_jnp")
        print(path.split("/")[-2], r["case"], r["n"], {k: round(r[k], 3) for k in keys if k in r},
              {k: v for k, v in r.items() if k.endswith("_error")})
PY
