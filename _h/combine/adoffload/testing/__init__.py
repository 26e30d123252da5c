"""Testing machinery shipped with adoffload: differential fuzzing of the whole pipeline.

* ``generator`` writes random kernels in the kernel language as source text;
* ``reference`` runs the same source as plain Python, one call per thread, on numpy arrays;
* ``fuzz`` compiles each kernel, compares it with the reference, checks forward against
  reverse mode (inner-product identity) and both against finite differences. Long runs:
  ``python -m adoffload.testing.fuzz --cases N --seed S``.
* ``cprograms`` writes random differentiable C functions (loops, recurrences through memory,
  early exits, heap scratch, structs, helpers, libm); ``differential`` compiles them with the
  ``ziglang`` wheel's clang at -O0..-O3, loads them with ``ado.from_llvm`` and checks forward and
  reverse AD against central differences and each other:
  ``python -m adoffload.testing.differential --count N --seed S --opt 0 1 2 3 --out DIR``.
"""
