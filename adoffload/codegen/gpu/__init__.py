"""GPU targets: NVPTX (``nvptx``) and AMDGPU (``amdgpu``), their math (``mathmap``, ``devicemath``),
toolchain pieces (``tools``), and the GPU-only lowerings of entries and atomics (rows, grid-stride loops,
reductions, lane combining, shared-memory atomics and batches, ordered adds, load scheduling)."""
