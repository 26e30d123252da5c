"""Kernels the suites time (and tests reuse): the RAJAPerf subset, the block kernels of issue 13,
and kernels written the way a user writes them (user_kernels)."""
