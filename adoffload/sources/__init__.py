"""Kernels and functions written in other languages: LLVM IR from clang, rustc or numba (``llvm``),
CUDA and HIP source (``cuda``)."""
