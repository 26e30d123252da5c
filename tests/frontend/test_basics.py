import numpy as np


import adoffload.language.builtins as ado
from adoffload.frontend import compile_kernel
from adoffload.language.types import In, Out, f32, f64

from .jit import run


def saxpy(a: f32, x: In[f32], y: In[f32], out: Out[f32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


def test_saxpy_runs_and_matches_numpy():
    n = 37
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    status = run(saxpy, 2.5, x, y, out, grid=n)
    assert status[0] == 0
    np.testing.assert_allclose(out, np.float32(2.5) * x + y, rtol=1e-6)


def test_signature_and_flat_arguments():
    source = compile_kernel(saxpy)
    assert source.signature.grid_rank == 1
    assert [p.name for p in source.signature.params] == ["a", "x", "y", "out"]
    assert 'define void @"saxpy"(i64 %"tid0", float %"a", ptr %"x", i64 %"x.shape0"' in source.llvm_ir
    assert source.candidate_facts == {(1, 0, 0), (2, 0, 0), (3, 0, 0)}


def test_out_of_bounds_records_status_and_skips_the_access():
    def shifted(x: In[f64], out: Out[f64]):
        i = ado.tid()
        out[i] = x[i + 1]

    x = np.arange(5.0)
    out = np.full(5, -1.0)
    status = run(shifted, x, out, grid=5)
    assert list(status) == [1, 0, 5, 0]          # code, param x, index 5, dim 0
    np.testing.assert_array_equal(out, [1, 2, 3, 4, -1])   # thread 4 wrote nothing


def test_negative_index_is_an_error_not_a_wrap_around():
    def back(x: In[f64], out: Out[f64]):
        i = ado.tid()
        out[i] = x[i - 1]

    out = np.zeros(3)
    status = run(back, np.arange(3.0), out, grid=3)
    assert list(status) == [1, 0, -1, 0]


def test_proven_fact_removes_the_check_and_unchecked_mode():
    checked = compile_kernel(saxpy).llvm_ir
    proven = compile_kernel(saxpy, proven=frozenset({(1, 0, 0), (2, 0, 0), (3, 0, 0)})).llvm_ir
    unchecked = compile_kernel(saxpy, bounds_check=False).llvm_ir
    assert checked.count("atomicrmw xchg") == 3
    assert "atomicrmw xchg" not in proven and "atomicrmw xchg" not in unchecked


def test_f32_kernel_with_float_literals_has_no_double():
    def scale(a: f32, x: In[f32], out: Out[f32]):
        i = ado.tid()
        acc = 0.0
        acc += a * 2.0 + x[i] / 3.0 - 1
        out[i] = ado.sqrt(acc * acc) + float(i)

    source = compile_kernel(scale)
    assert "double" not in source.llvm_ir
    out = np.zeros(4, np.float32)
    x = np.arange(4, dtype=np.float32)
    run(scale, 1.5, x, out, grid=4)
    expected = np.abs(np.float32(3.0) + x / np.float32(3.0) - 1) + np.arange(4)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
