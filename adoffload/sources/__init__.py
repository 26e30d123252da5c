"""Kernels and functions written in other languages: LLVM IR from clang, rustc or numba (``llvm``),
C source through clang (``c``), CUDA and HIP source (``cuda``)."""
