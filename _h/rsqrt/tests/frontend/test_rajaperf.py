import numpy as np
import pytest

from .jit import HostKernel
from .rajaperf_kernels import KERNELS, reference


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_rajaperf_kernel_matches_numpy(name):
    spec = KERNELS[name]
    n = 23
    rng = np.random.default_rng(7)
    args = spec.make_args(n, rng)
    expected = reference(name, {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                for k, v in args.items()}, n)
    kernel = HostKernel(spec.kernel)
    status = kernel(*args.values(), grid=spec.grid(n))
    assert list(status) == [0, 0, 0, 0]
    for output, value in expected.items():
        np.testing.assert_allclose(args[output], value, rtol=spec.rtol, atol=1e-14, err_msg=output)


def test_pi_reduce_approximates_pi():
    spec = KERNELS["PI_REDUCE"]
    args = spec.make_args(2000, None)
    HostKernel(spec.kernel)(*args.values(), grid=2000)
    assert abs(args["pi"][0] * 4 - np.pi) < 1e-6


def test_nested_init_is_a_3d_grid():
    assert HostKernel(KERNELS["NESTED_INIT"].kernel).signature.grid_rank == 3
