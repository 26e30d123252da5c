"""Deferred uniform atomics on an NVIDIA GPU: every reduction mode and awkward block sizes
(skips without a GPU)."""
import numpy as np
import pytest

from adoffload.codegen import compile_for_target

from .test_cuda_run import _gpu_available, context, run  # noqa: F401  (fixture + launcher)
from .test_reductions import dot, stats

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _gpu_available(), reason="no NVIDIA GPU / driver")]


def _flat(k):
    return [f.llvm_type for f in k.signature.flat_params()]


@pytest.mark.parametrize("mode", ["block", "warp", "thread", "off"])
@pytest.mark.parametrize("block", [256, 96, 100, 1024, 33])
def test_dot_and_stats_on_gpu(context, mode, block):   # noqa: F811
    rng = np.random.default_rng(block)
    n = 100_003
    a, b, out = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), np.array([0.5])
    ptx = compile_for_target(dot.module_text(), dot.body_name, _flat(dot), 1, "nvptx", context,
                             cache=False, reductions=mode)
    rec = run(ptx, dot.body_name, [a, b, out], [("a", 0), n, ("a", 1), n, ("a", 2), 1], _flat(dot), [n], block)
    assert rec[0] == 0
    assert out[0] == pytest.approx(0.5 + a @ b, rel=1e-10)

    v = rng.integers(-10**6, 10**6, n).astype(np.int32)
    s, lo, hi = np.array([3], np.int64), np.array([2**31 - 1], np.int32), np.array([-2**31], np.int32)
    f = np.zeros(2, np.float32)
    ptx = compile_for_target(stats.module_text(), stats.body_name, _flat(stats), 1, "nvptx", context,
                             cache=False, reductions=mode)
    rec = run(ptx, stats.body_name, [v, s, lo, hi, f],
              [("a", 0), n, ("a", 1), 1, ("a", 2), 1, ("a", 3), 1, ("a", 4), 2], _flat(stats), [n], block)
    assert rec[0] == 0
    assert (s[0], lo[0], hi[0]) == (3 + v.astype(np.int64).sum(), v.min(), v.max())
    assert f[0] == 0 and f[1] == pytest.approx(v.astype(np.float64).sum(), rel=1e-4)
