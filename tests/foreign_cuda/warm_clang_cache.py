"""Fill the clang-IR cache (``$ADOFFLOAD_CACHE_DIR/clang-ir``) with every CUDA source the GPU tests
and benchmarks compile, so a GPU machine without clang can run them: run
``python -m tests.foreign_cuda.warm_clang_cache`` where clang is, with ADOFFLOAD_CACHE_DIR set,
then carry that folder and point ADOFFLOAD_CACHE_DIR at it there. The CPU tests compile more
(sources written in the tests, HIP builds): to run a folder on the GPU machine, run it once where
clang is with the same ADOFFLOAD_CACHE_DIR, which caches every source it compiles. CUDA sources are
compiled by tests/foreign_cuda, tests/blocks, tests/determinism, tests/reliability and
tests/test_readme.py; ``from_c``'s IR is keyed by the host CPU, so its tests need clang itself."""
from __future__ import annotations

from pathlib import Path

from adoffload.sources.cuda.compile import compile_to_llvm

ROOT = Path(__file__).resolve().parents[2]


# (source, clang options) the GPU tests compile with flags (test_faults.py and the bad-input matrix: line tables)
def flagged() -> list[tuple[str, tuple[str, ...]]]:
    from adoffload.testing.bad_input_sources import CUDA_SOURCE        # the bad-input matrix's GPU variant
    from tests.foreign_cuda import sources as corpus
    return [(corpus.FAULTS, ("-gline-tables-only",)), (CUDA_SOURCE, ("-gline-tables-only",))]


def sources() -> list[str]:
    from benchmarks.suites import foreign_cuda
    from tests.foreign_cuda import sources as corpus
    found = [v for v in vars(corpus).values() if isinstance(v, str) and "__global__" in v]
    found.append(foreign_cuda.CUDA)
    found += [p.read_text() for p in sorted((ROOT / "benchmarks" / "cuda").glob("*.cu"))]
    return found


if __name__ == "__main__":
    texts = sources()
    for text in texts:
        compile_to_llvm(text)
    for text, options in flagged():
        compile_to_llvm(text, options=options)
    print(f"{len(texts) + len(flagged())} CUDA sources in the clang-IR cache")
