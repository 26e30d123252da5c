"""A row softmax as people write it in CUDA: strided loops over a row's columns (a trip count
that differs per thread), then two shared-memory tree reductions with barriers. clang -O2 reads
``blockDim.x`` on both sides of the first loop's guard and joins them in a phi; after translation
both are the same constant, and the barrier loops that follow are uniform (they were refused as
divergent). Checked in double precision against numpy, central differences and <Jv,w> = <v,J^T w>."""
import numpy as np
import pytest

import adoffload as ado

from .checks import check_derivatives

SOFTMAX = r"""
__global__ void softmax_rows(const double* x, double* y, int cols) {
  int row = blockIdx.x, t = threadIdx.x;
  __shared__ double red[64];
  double m = -1e300;
  for (int c = t; c < cols; c += blockDim.x) m = fmax(m, x[row * cols + c]);
  red[t] = m; __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (t < s) red[t] = fmax(red[t], red[t + s]); __syncthreads(); }
  m = red[0]; __syncthreads();
  double sum = 0.0;
  for (int c = t; c < cols; c += blockDim.x) sum += exp(x[row * cols + c] - m);
  red[t] = sum; __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (t < s) red[t] += red[t + s]; __syncthreads(); }
  sum = red[0];
  for (int c = t; c < cols; c += blockDim.x) y[row * cols + c] = exp(x[row * cols + c] - m) / sum;
}
"""


@pytest.mark.parametrize("level", ["-O0", "-O2", "-O3"])
def test_row_softmax_runs_and_differentiates(level):
    mod = ado.from_cuda(SOFTMAX, options=(level,))
    k = mod.kernel("softmax_rows", x=ado.In[ado.f64], y=ado.Out[ado.f64], cols=ado.i32)
    rows, cols = 3, 150                  # more columns than threads: each thread loops 2 or 3 times
    x = np.random.default_rng(1).standard_normal(rows * cols)
    y = np.zeros_like(x)
    k(x, y, cols, blocks=rows, threads=64)
    e = np.exp(x.reshape(rows, cols) - x.reshape(rows, cols).max(1, keepdims=True))
    np.testing.assert_allclose(y.reshape(rows, cols), e / e.sum(1, keepdims=True), rtol=1e-13)
    check_derivatives(k, ["x"], {"x": x, "y": np.zeros_like(x), "cols": np.int32(cols)},
                      {"blocks": rows, "threads": 64})
