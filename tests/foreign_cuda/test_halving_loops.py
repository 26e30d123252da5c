"""Tree reductions whose loop halves its counter (``for (h = blockDim.x / 2; h > 0; h >>= 1)``) get a
static trip bound (analysis/trip_bounds.py), from clang's IR at -O0 to -O3 and from our front end, so
their VJP keeps its tape in registers instead of a launcher-sized dynamic tape; derivatives are
checked against central differences and <Jv, w> = <v, J^T w>."""
import numpy as np
import pytest

import adoffload as ado

from .checks import check_derivatives

TREE = r"""
template <typename I>
__device__ void tree(double* s, I t) {
  for (I h = blockDim.x / 2; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h] * s[t + h];
    __syncthreads();
  }
}
__global__ void tree_int(const double* x, double* out) {
  __shared__ double s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  tree<int>(s, t);
  if (t == 0) out[blockIdx.x] = s[0];
}
__global__ void tree_unsigned(const double* x, double* out) {
  __shared__ double s[64];
  unsigned t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  tree<unsigned>(s, t);
  if (t == 0) out[blockIdx.x] = s[0];
}
"""


@pytest.mark.parametrize("level", ["-O0", "-O1", "-O2", "-O3"])
def test_cuda_tree_reductions_get_a_static_tape_at_every_level(level):
    mod = ado.from_cuda(TREE, options=(level,))
    x = np.random.default_rng(3).uniform(0.1, 0.5, 128)
    for name in ("tree_int", "tree_unsigned"):
        k = mod.kernel(name, x=ado.In[ado.f64], out=ado.Out[ado.f64])
        assert ado.vjp(k, wrt=["x"]).specialize((64,)).tape is None, (name, level)
        check_derivatives(k, ["x"], {"x": x, "out": np.zeros(2)}, {"blocks": 2, "threads": 64})


@ado.kernel(block=64)
def tree_ours(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    s = ado.shared(64, ado.f64)
    s[t] = x[i]
    ado.sync_threads()
    h = 64 // 2
    while h > 0:
        if t < h:
            s[t] += s[t + h] * s[t + h]
        ado.sync_threads()
        h = h // 2
    if t == 0:
        out[ado.block_id()] = s[0]


def test_our_languages_tree_reduction_gets_a_static_tape():
    reverse = ado.vjp(tree_ours, ["x"])
    assert reverse.tape is None
    x = np.random.default_rng(4).uniform(0.1, 0.5, 128)
    w = np.random.default_rng(5).standard_normal(2)

    def f(x):
        out = np.zeros(2)
        tree_ours(x, out, grid=128)
        return out
    gx = np.zeros(128)
    reverse(x, np.zeros(2), gx, w.copy(), grid=128)
    v = np.random.default_rng(6).standard_normal(128)
    step = 1e-6
    jv = (f(x + step * v) - f(x - step * v)) / (2 * step)
    np.testing.assert_allclose(gx @ v, jv @ w, rtol=1e-7)
