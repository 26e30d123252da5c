"""The host CPU target: MCJIT machine code (``program``), host block kernels split at their barriers
(``block_split``), and what foreign host code needs around it (runtimes of Rust, numba and libc++,
struct-by-value calls, failure guards)."""
