"""adoffload's benchmarks: ``python -m benchmarks --list`` names the suites, ``python -m benchmarks
SUITE --out DIR`` runs one (benchmarks/README.md). Timings never belong in unit tests; the rules of
measurement are shared/BENCHMARKS.md's."""
