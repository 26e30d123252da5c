"""Testing machinery shipped with adoffload: differential fuzzing of the whole pipeline.

* ``generator`` writes random kernels in the kernel language as source text;
* ``reference`` runs the same source as plain Python, one call per thread, on numpy arrays;
* ``fuzz`` compiles each kernel, compares it with the reference, checks forward against
  reverse mode (inner-product identity) and both against finite differences. Long runs:
  ``python -m adoffload.testing.fuzz --cases N --seed S``.
"""
