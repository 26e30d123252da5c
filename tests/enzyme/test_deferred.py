"""Deferred shadow updates (enzyme/deferred.py): an adjoint loop's updates at a run-invariant
address (``d_x[i]``, ``i = tid()``) go to a thread-local sum, added once at the end of the sweep.

Checked against finite differences, against the per-site updates (``ADOFFLOAD_DEFER_ADDS=0``),
with a neighbor ``j == i`` adding into the same element, with threads running concurrently,
and with a guarded access whose address the primal never reaches.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import adoffload as ado
from adoffload.analysis.address_classes import ParallelInfo, lower_uniform_adds
from adoffload.ir import export_module

from .test_reverse_support import CONST, DUP, compile_host, derive


@ado.kernel
def pair_sum(x: ado.In[ado.f64], nb: ado.In[ado.i64, 2], e: ado.Out[ado.f64]):
    i = ado.tid()
    acc = 0.0
    for k in range(nb.shape[1]):
        j = nb[i, k]
        if j >= 0:
            d = x[j] - x[i]
            acc = acc + ado.sin(d) * x[i] + d * d * x[j]
    e[i] = acc


def _pair_inputs(n=9, seed=0):
    rng = np.random.default_rng(seed)
    nb = rng.integers(0, n, size=(n, 5))
    nb[:, 0] = np.arange(n)                     # every atom is its own neighbor once ...
    nb[::2, 4] = -1                             # ... and some slots are empty
    return dict(x=rng.uniform(-1.0, 1.0, n), nb=nb.astype(np.int64), e=np.zeros(n)), rng.standard_normal(n)


def _gradient(rev, values, seed):
    """d_x of ``rev`` (a vjp of pair_sum) for the output seed ``seed``."""
    d_x, d_e = np.zeros_like(values["x"]), seed.copy()
    rev(**dict(values, e=np.zeros_like(values["e"])), d_x=d_x, d_e=d_e, grid=(len(d_x),))
    return d_x


def _finite_differences(values, seed, h=1e-6):
    n = len(values["x"])
    want = np.zeros(n)
    for a in range(n):
        out = []
        for sign in (1.0, -1.0):
            v = dict(values, x=values["x"].copy(), e=np.zeros(n))
            v["x"][a] += sign * h
            pair_sum(**v, grid=(n,))
            out.append(float(seed @ v["e"]))
        want[a] = (out[0] - out[1]) / (2 * h)
    return want


def _loop_atomics(kernel):
    from adoffload.enzyme.stats import ir_stats
    module, body = kernel.ir()
    return ir_stats(module.functions[body]).atomics


def test_self_neighbor_adds_into_the_deferred_element(monkeypatch, tmp_path):
    values, seed = _pair_inputs()
    got = _gradient(ado.vjp(pair_sum, ["x"]), values, seed)
    np.testing.assert_allclose(got, _finite_differences(values, seed), rtol=1e-7, atol=1e-8)
    deferred = _loop_atomics(ado.vjp(pair_sum, ["x"]))
    # d_x[j] stays atomic in the loop; d_x[i] is one atomic per thread after it
    assert deferred[("fadd double", "per iteration")] == 1 and deferred[("fadd double", "per thread")] == 1

    monkeypatch.setenv("ADOFFLOAD_DEFER_ADDS", "0")
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))      # derived kernels are cached by base IR
    per_site = ado.vjp(ado.kernel(pair_sum.pyfunc), ["x"])
    assert _loop_atomics(per_site)[("fadd double", "per iteration")] == 2
    old = _gradient(per_site, values, seed)
    np.testing.assert_allclose(got, old, rtol=1e-12, atol=1e-13)


# out[tid] = sum_k (x[j] - x[tid])^2 * x[tid], j = nb[tid, k]: d_x[tid] is deferred, d_x[j] atomic
NEIGHBORS = """
define void @f(i64 %tid, i64 %m, ptr %x, ptr %nb, ptr %out) {
entry:
  %row = mul i64 %tid, %m
  br label %loop
loop:
  %k = phi i64 [0, %entry], [%k1, %loop]
  %acc = phi double [0.0, %entry], [%acc1, %loop]
  %s = add i64 %row, %k
  %pj = getelementptr i64, ptr %nb, i64 %s
  %j = load i64, ptr %pj
  %pi = getelementptr double, ptr %x, i64 %tid
  %xi = load double, ptr %pi
  %px = getelementptr double, ptr %x, i64 %j
  %xj = load double, ptr %px
  %d = fsub double %xj, %xi
  %dd = fmul double %d, %d
  %t = fmul double %dd, %xi
  %acc1 = fadd double %acc, %t
  %k1 = add i64 %k, 1
  %c = icmp slt i64 %k1, %m
  br i1 %c, label %loop, label %done
done:
  %r = phi double [%acc1, %loop]
  %po = getelementptr double, ptr %out, i64 %tid
  store double %r, ptr %po
  ret void
}
"""


@pytest.mark.parametrize("concurrent", [False, True])
def test_concurrent_threads_with_self_neighbors(concurrent):
    from .test_parallel import _grid_check
    nb = np.array([[0, 1, 2], [1, 1, 0], [3, 2, 2], [0, 3, 1]], dtype=np.int64)   # j == tid in each row
    x = np.array([0.4, -1.1, 0.9, 1.6])
    module, result = _grid_check(NEIGHBORS, [CONST, CONST, DUP, CONST, DUP],
                                 lambda: [0, 3, x.copy(), nb.copy(), np.zeros(4)], 4, concurrent=concurrent)
    text = export_module(module).split(f'@"{result.function.name}"')[1]
    assert text.count("atomicrmw fadd") == 2 and "deferred.sum" in text


# out[tid] = sum_k x[tid]^2 + (tid > 0 ? x[tid - 1] * x[tid] : 0): thread 0 never reaches x[-1]
GUARDED = """
define void @g(i64 %tid, i64 %m, ptr %x, ptr %out) {
entry:
  %has = icmp sgt i64 %tid, 0
  %prev = sub i64 %tid, 1
  br label %loop
loop:
  %k = phi i64 [0, %entry], [%k1, %latch]
  %acc = phi double [0.0, %entry], [%acc2, %latch]
  %pi = getelementptr double, ptr %x, i64 %tid
  %xi = load double, ptr %pi
  %t = fmul double %xi, %xi
  %acc1 = fadd double %acc, %t
  br i1 %has, label %left, label %latch
left:
  %pp = getelementptr double, ptr %x, i64 %prev
  %xp = load double, ptr %pp
  %u = fmul double %xp, %xi
  %accl = fadd double %acc1, %u
  br label %latch
latch:
  %acc2 = phi double [%acc1, %loop], [%accl, %left]
  %k1 = add i64 %k, 1
  %c = icmp slt i64 %k1, %m
  br i1 %c, label %loop, label %done
done:
  %r = phi double [%acc2, %latch]
  %po = getelementptr double, ptr %out, i64 %tid
  store double %r, ptr %po
  ret void
}
"""


def test_an_address_the_primal_never_reached_is_not_written():
    module, result = derive(GUARDED, "g", [CONST, CONST, DUP, DUP], canonical=False, parallel=ParallelInfo((0,)))
    lower_uniform_adds(module, "host")
    fns = compile_host(module, [result.function.name])
    n, m = 4, 3
    x = np.array([0.5, -1.5, 2.0, 0.25])
    d_buf = np.full(n + 1, -0.0)          # d_buf[0] is d_x[-1]: adding even +0.0 would clear its sign
    d_buf[1:] = 0.0
    seed = np.array([1.0, -2.0, 0.5, 3.0])
    for t in range(n):
        fns[result.function.name](t, m, x.copy(), np.zeros(n), d_buf[1:], seed.copy())
    assert np.signbit(d_buf[0]) and d_buf[0] == 0.0
    want = np.zeros(n)
    for t in range(n):
        want[t] += seed[t] * m * 2 * x[t]
        if t > 0:
            want[t] += seed[t] * m * x[t - 1]
            want[t - 1] += seed[t] * m * x[t]
    np.testing.assert_allclose(d_buf[1:], want, rtol=1e-14)
    text = export_module(module).split(f'@"{result.function.name}"')[1]
    assert text.count("deferred.sum") >= 2


@ado.kernel
def cut_sum(x: ado.In[ado.f64], nb: ado.In[ado.i64, 2], c: ado.f64, e: ado.Out[ado.f64]):
    i = ado.tid()
    acc = 0.0
    for k in range(nb.shape[1]):
        j = nb[i, k]
        if j >= 0:
            d = x[i] - x[j]
            if d * d < c:              # a cutoff: pairs past it contribute nothing (their d_x[i] adjoint is -0.0)
                acc = acc + d * d * d
    e[i] = acc


def test_a_deferred_sum_of_only_missing_contributions_adds_nothing(monkeypatch, tmp_path):
    """The thread-local sum starts at -0.0, fadd's identity: where every pair of atom i is past the
    cutoff, d_x[i] keeps its bits, as the per-site adds (each adding -0.0) leave them. From +0.0 the
    flush turned a gradient element of -0.0 into +0.0."""
    n = 6
    x = np.arange(n, dtype=np.float64) * 10.0                        # all pairs far apart
    nb = np.full((n, 2), -1, np.int64)
    nb[:-1, 0] = n - 1                                              # everyone's one neighbor: the last atom
    x[1] = x[-1] - 0.5                                              # ... near atom 1 only

    def gradient(kernel):
        d_x = np.full(n, -0.0)
        kernel(x, nb, 1.0, np.zeros(n), d_x=d_x, d_e=np.ones(n), grid=n)
        return d_x
    deferred = gradient(ado.vjp(cut_sum, ["x"]))
    monkeypatch.setenv("ADOFFLOAD_DEFER_ADDS", "0")
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))      # derived kernels are cached by base IR
    per_site = gradient(ado.vjp(ado.kernel(cut_sum.pyfunc), ["x"]))
    assert deferred.tobytes() == per_site.tobytes(), (deferred, per_site)
    assert np.all(np.signbit(deferred[[0, 2, 3, 4]])) and deferred[1] == 0.75 and deferred[5] == -0.75   # 3 d^2
