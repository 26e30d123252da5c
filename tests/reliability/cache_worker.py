"""Kernels compiled by several processes at once (test_concurrency.py); defined in a file so
spawned children can import them by name."""
import os

import numpy as np

import adoffload as ado


@ado.kernel
def poly(a: ado.f64, x: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = a * x[i] * x[i] + ado.sin(x[i])


@ado.kernel
def gather(x: ado.In[ado.f64], idx: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    out[i] = x[idx[i]] * 2.0


def compile_and_run(cache_dir: str) -> list:
    """Compile poly, its reverse and gather into ``cache_dir``; return the results for checking."""
    os.environ["ADOFFLOAD_CACHE_DIR"] = cache_dir
    x = np.linspace(-1.0, 1.0, 64)
    out = np.zeros(64)
    poly(1.5, x, out, grid=64)
    d_x = np.zeros(64)
    ado.vjp(poly, ["x"])(1.5, x, np.zeros(64), d_x=d_x, d_out=np.ones(64), grid=64)
    g = np.zeros(64)
    gather(x, np.arange(64)[::-1].copy(), g, grid=64)
    return [out.tolist(), d_x.tolist(), g.tolist()]


def expected() -> list:
    x = np.linspace(-1.0, 1.0, 64)
    return [(1.5 * x * x + np.sin(x)).tolist(), (3.0 * x + np.cos(x)).tolist(), (2.0 * x[::-1]).tolist()]


def compile_and_run_as_other_version(cache_dir: str) -> list:
    """The same, with the cache believing another adoffload version wrote it."""
    from adoffload.codegen import cache
    real = cache._versions
    cache._versions = lambda: tuple(v if not v.startswith("adoffload=") else "adoffload=0.0.0-other"
                                    for v in real())
    return compile_and_run(cache_dir)
