"""Random block kernels on the GPU give what the host gives (adoffload/testing/block_fuzz_gpu.py):
primal, JVP and VJP (default and deterministic) of generated kernels, the same inputs on both
devices. Runs where a CUDA device is; the host side alone is block_fuzz.py's (test_block_fuzz.py)."""
from __future__ import annotations

import pytest

from adoffload.errors import Error
from adoffload.testing.block_fuzz import case_seed
from adoffload.testing.block_fuzz_gpu import compare_case


def _cuda_or_none():
    try:
        from adoffload.runtime import get_device
        return get_device("cuda")
    except (Error, ImportError, OSError):
        return None


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_cuda_or_none() is None, reason="no CUDA device / driver")]


@pytest.mark.parametrize("index", range(24))
def test_generated_block_kernel_runs_on_the_gpu_as_on_the_host(index, tmp_path):
    outcome, problems, source = compare_case(case_seed(8, index), tmp_path)
    assert outcome in ("same", "skipped"), f"{outcome}: {problems}\n{source}"
