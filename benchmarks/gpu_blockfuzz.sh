#!/usr/bin/env bash
# h8/blockfuzz's GPU check (< 4 minutes): the block-kernel GPU tests after the engine changes of
# this branch (exchanges taped instead of recomputed in the reverse sweep; the deterministic
# log's base pointer placement), then the fuzzer's regression kernels. Results under
# $OUT/blockfuzz/: gpu_tests.txt, log.txt. Run from the repo root.
export PYTHONUNBUFFERED=1
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
mkdir -p "$OUT/blockfuzz"
log="$OUT/blockfuzz/log.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$log" 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 0 tests/blocks/test_cuda.py tests/blocks/test_deterministic_gpu.py \
  tests/determinism/test_gpu_blocks.py tests/blocks/test_block_fuzz.py > "$OUT/blockfuzz/gpu_tests.txt" 2>&1
echo "pytest exit $?" >> "$log"
