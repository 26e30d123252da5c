"""Peers the benchmarks compare against, each importable only where it is installed: jax-md
(chemistry), Warp and Numba (user_kernels, host), CuPy (user_kernels, GPU)."""
