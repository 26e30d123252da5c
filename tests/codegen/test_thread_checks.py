"""Checks decided by the arguments alone, tested once per thread (codegen/gpu/uniform_checks.py
``add_thread_checks_function``): the GPU entry runs ``@<body>.unchecked`` where every such
check passes and the body as it was elsewhere.

The entry runs on this CPU (tests/codegen/emulated.py), one call per GPU thread in order, and
must match the kernel's semantics exactly: results in bounds, and out of bounds the same status
record and the same partial writes (the body stops at its first failing access).
"""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen import abi
from adoffload.codegen.gpu.uniform_checks import add_thread_checks_function, unchecked_function_name
from adoffload.ir import import_module, verify

from .emulated import EmulatedEntry


@ado.kernel
def shifted(px: ado.InOut[ado.f64], cx: ado.In[ado.f64], off: ado.i64):
    i = ado.tid()
    a = cx[i + off * 2]
    b = a - px[i + off * 2]
    px[i + off * 2] = a
    px[i + off * 3] = b - px[i + off * 3]


def _reference(px, cx, off, n):
    """The kernel's meaning, threads in order: each stops at its first failing access, the
    status record keeps the first failure. Returns (px after, status record)."""
    px, record = px.copy(), [0, 0, 0, 0]
    for i in range(n):
        failed = next(((param, index) for index, size, param in ((i + 2 * off, len(cx), 1), (i + 2 * off, len(px), 0))
                       if index >= size), None)
        if failed is None:
            a = cx[i + 2 * off]
            b = a - px[i + 2 * off]
            px[i + 2 * off] = a
            if i + 3 * off < len(px):
                px[i + 3 * off] = b - px[i + 3 * off]
                continue
            failed = (0, i + 3 * off)
        if record[0] == 0:
            record = [1, failed[0], failed[1], 0]
    return px, record


@pytest.mark.parametrize("px_len,cx_len", [(40, 40), (30, 40), (40, 20), (16, 40)])
def test_versioned_entry_matches_the_kernel(monkeypatch, px_len, cx_len):
    entry = EmulatedEntry(monkeypatch, shifted)
    assert ".thread_checks_ok" in entry.module and ".unchecked" in entry.module
    n, off = 12, 5
    rng = np.random.default_rng(px_len + cx_len)
    px, cx = rng.integers(-9, 9, px_len).astype(np.float64), rng.integers(-9, 9, cx_len).astype(np.float64)
    expected, record = _reference(px, cx, off, n)
    status = entry.linear_launch([px.ctypes.data, px_len, cx.ctypes.data, cx_len, off], (n,), n)
    assert list(status) == record
    np.testing.assert_array_equal(px, expected)


# Two checks share one failure block (a phi picks the index): the unchecked copy drops the edges
# of its checks, and the block stays for the check that is not decided by the arguments.
SHARED = """
define void @shared(i64 %tid0, ptr %x, i64 %x.s, ptr %status) {
entry:
  %a = add i64 %tid0, 1
  %ok1 = icmp ult i64 %a, %x.s
  br i1 %ok1, label %next, label %fail
next:
  %b = add i64 %tid0, 2
  %ok2 = icmp ult i64 %b, %x.s
  br i1 %ok2, label %load, label %fail
load:
  %p = getelementptr i64, ptr %x, i64 %tid0
  %v = load i64, ptr %p
  %ok3 = icmp ult i64 %v, %x.s
  br i1 %ok3, label %store, label %fail
store:
  %q = getelementptr i64, ptr %x, i64 %v
  store i64 7, ptr %q
  ret void
fail:
  %at = phi i64 [ %a, %entry ], [ %b, %next ], [ %v, %load ]
  %old = atomicrmw xchg ptr %status, i64 1 monotonic
  %slot = getelementptr i64, ptr %status, i64 2
  store i64 %at, ptr %slot
  ret void
}
"""


def test_unchecked_copy_keeps_checks_that_read_memory():
    text, name = add_thread_checks_function(SHARED, "shared")
    assert name == "shared.thread_checks_ok"
    module = import_module(text)
    verify(module)
    unchecked = module.functions[unchecked_function_name("shared")]
    branches = [i for i in unchecked.instructions() if i.opcode == "br" and len(i.blocks) == 2]
    assert len(branches) == 1 and branches[0].operands[0].name == "ok3"   # the data-dependent check
    fail = next(blk for blk in unchecked.blocks if blk.name == "fail")
    assert [b.name for b in fail.phis[0].blocks] == ["load"]


def test_one_check_is_not_versioned():
    @ado.kernel
    def single(out: ado.Out[ado.f64], off: ado.i64):
        i = ado.tid()
        out[i + off] = 1.0
    flat = [f.llvm_type for f in single.signature.flat_params()]
    module = abi.add_gpu_entry(single.module_text(), single.body_name, flat, 1, "nvptx")
    assert ".unchecked" not in module


def test_ptx_fast_path_has_no_check_between_accesses():
    ptx = shifted.compiled("nvptx", arch="sm_90", noalias=True).ptx
    # two copies of each access (versioned), the status record claimed only on the checked side
    assert ptx.count("ld.global.nc.f64") + ptx.count("ld.global.nc.b64") == 2
    assert ptx.count("atom.global.exch") == 3      # one per check, all in the checked copy


def test_large_bodies_keep_their_checks(monkeypatch):
    from adoffload.codegen.gpu import uniform_checks
    monkeypatch.setattr(uniform_checks, "MAX_COPIED_INSTRUCTIONS", 10)
    assert add_thread_checks_function(shifted.module_text(), shifted.body_name) == (shifted.module_text(), None)
