"""The host reverse kernel of a user's gather energy, made cheaper without changing its gradient
(issue 31): plain read-modify-writes where one OS thread runs the launch (codegen/host/serial.py),
``noalias`` body parameters on the host entry (codegen/abi.py), and strong zeros that are -0.0 so a
missing contribution folds away (enzyme/rules.py strong_mul). Each property is checked on the code,
and the gradients against central differences and forward mode (<J v, w> = <v, J^T w>), with the
serial and the atomic variant of one kernel side by side."""
from __future__ import annotations

import re

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.host.serial import has_update_atomics, plain_atomics
from adoffload.runtime.host import HostDevice


@ado.func
def _wrap(d, box):
    return d - box * ado.floor(d / box + 0.5)


@ado.kernel
def pair_energy(pos: ado.In[ado.f64, 2], neighbors: ado.In[ado.i32, 2], box: ado.f64, cutoff: ado.f64,
                energy: ado.Out[ado.f64]):
    """A user's Lennard-Jones energy over a padded int32 neighbor list (-1: an empty slot)."""
    i = ado.tid()
    e = 0.0
    for k in range(neighbors.shape[1]):
        j = neighbors[i, k]
        if j >= 0:
            dx = _wrap(pos[j, 0] - pos[i, 0], box)
            dy = _wrap(pos[j, 1] - pos[i, 1], box)
            dz = _wrap(pos[j, 2] - pos[i, 2], box)
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < cutoff * cutoff:
                s6 = (1.0 / r2) ** 3
                e += 2.0 * (s6 * s6 - s6)
    energy[i] = e


BOX, CUTOFF = 5.0, 2.2


def _system(n: int, seed: int = 0):
    """Atoms on a jittered grid (no two closer than ~0.8) and a full neighbor list with padding."""
    rng = np.random.default_rng(seed)
    side = int(np.ceil(n ** (1 / 3)))
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:n]
    pos = (grid * (BOX / side) + rng.uniform(-0.1, 0.1, (n, 3))).astype(np.float64)
    d = pos[None] - pos[:, None]
    d -= BOX * np.floor(d / BOX + 0.5)
    near = (np.sum(d * d, -1) < (CUTOFF + 0.4) ** 2) & ~np.eye(n, dtype=bool)
    slots = int(near.sum(1).max()) + 2
    nbr = -np.ones((n, slots), np.int32)
    for i in range(n):
        js = np.flatnonzero(near[i])
        nbr[i, :len(js)] = rng.permutation(js)
    return pos, nbr


def check_against_central_differences(grad, pos, nbr, seed, rng, samples: int = 6, h: float = 1e-6):
    """``grad`` of sum(seed * energy) against central differences at ``samples`` random coordinates."""
    for _ in range(samples):
        i, c = int(rng.integers(len(pos))), int(rng.integers(3))
        up, down = pos.copy(), pos.copy()
        up[i, c] += h
        down[i, c] -= h
        fd = (seed @ _energy(up, nbr) - seed @ _energy(down, nbr)) / (2 * h)
        assert abs(grad[i, c] - fd) <= 1e-6 * max(1.0, abs(fd)), (i, c, grad[i, c], fd)


def _energy(pos, nbr, device="cpu"):
    out = np.zeros(len(pos))
    pair_energy(pos, nbr, BOX, CUTOFF, out, grid=len(pos), device=device)
    return out


def _gradient(pos, nbr, seed, device):
    d_pos = np.zeros_like(pos)
    out = np.zeros(len(pos))
    ado.vjp(pair_energy, ["pos"])(pos, nbr, BOX, CUTOFF, out, d_pos=d_pos, d_energy=seed.copy(), grid=len(pos),
                                   device=device)
    return out, d_pos


def _variants(kernel) -> list[dict]:
    return [dict(key[4]) for key in kernel._compiled if key[0] == "host"]


def test_one_thread_launch_has_plain_adjoint_updates_and_the_same_gradient():
    pos, nbr = _system(64)
    seed = np.random.default_rng(1).uniform(0.5, 1.5, len(pos))
    one = HostDevice(workers=1)
    many = HostDevice(workers=2)
    assert one.one_thread(len(pos)) and not many.one_thread(len(pos))
    e1, g1 = _gradient(pos, nbr, seed, one)
    e2, g2 = _gradient(pos, nbr, seed, many)
    reverse = ado.vjp(pair_energy, ["pos"])
    variants = _variants(reverse)
    assert any(v.get("serial") for v in variants) and any(not v.get("serial") for v in variants)
    serial = reverse.compiled("host", serial=True, noalias=True).artifact.optimized_ir
    atomic = reverse.compiled("host", noalias=True).artifact.optimized_ir
    adjoint = lambda text: text[text.index("define void @pair_energy.vjp.host"):]   # noqa: E731
    assert "atomicrmw fadd" in adjoint(atomic)
    assert "atomicrmw fadd" not in adjoint(serial)          # d_pos[j] += ... as load, fadd, store
    np.testing.assert_array_equal(e1, e2)
    np.testing.assert_allclose(g1, g2, rtol=1e-12, atol=1e-12)   # only the order of the adds differs
    check_against_central_differences(g1, pos, nbr, seed, np.random.default_rng(2))


def test_forward_and_reverse_agree_on_random_directions():
    pos, nbr = _system(48, seed=3)
    rng = np.random.default_rng(4)
    v, w = rng.normal(size=pos.shape), rng.normal(size=len(pos))
    d_energy = np.zeros(len(pos))
    ado.jvp(pair_energy, ["pos"])(pos, nbr, BOX, CUTOFF, np.zeros(len(pos)), d_pos=v, d_energy=d_energy,
                                   grid=len(pos), device=HostDevice(workers=1))
    _, jtw = _gradient(pos, nbr, w, HostDevice(workers=1))
    assert abs(d_energy @ w - np.sum(v * jtw)) <= 1e-11 * max(1.0, abs(d_energy @ w))


def test_noalias_host_entry_gives_the_body_scoped_alias_metadata():
    reverse = ado.vjp(pair_energy, ["pos"])
    plain = reverse.compiled("host", serial=True).artifact.optimized_ir
    noalias = reverse.compiled("host", serial=True, noalias=True).artifact.optimized_ir
    scopes = lambda text: len(set(re.findall(r"!alias\.scope (!\d+)", text)))   # noqa: E731
    # without the launch's noalias only the adjoint's read-only arrays (pos, neighbors) have scopes of
    # their own (enzyme/reverse.py _mark_readonly_noalias); with it, the written arrays get theirs too
    assert scopes(plain) == 2
    assert scopes(noalias) > scopes(plain) and "!noalias" in noalias


def test_strong_zeros_fold_out_of_the_adjoint():
    """The floor in the minimum image has no derivative: its zero reached the difference's adjoint
    as a strong +0.0 and stayed as an ``fadd x, 0.0`` per coordinate per neighbor."""
    text = ado.vjp(pair_energy, ["pos"]).module_text()
    body = text[text.index("define void @pair_energy.vjp("):]
    assert not re.search(r"fadd double %[\w.]+, 0\.000000e\+00", body)
    assert not re.search(r"fadd double 0\.000000e\+00, %", body)


@ado.kernel
def histogram(values: ado.In[ado.f64], counts: ado.InOut[ado.i32], sums: ado.InOut[ado.f64],
              order: ado.Out[ado.i64], top: ado.InOut[ado.i32], ticket: ado.InOut[ado.i64]):
    i = ado.tid()
    b = ado.i32(values[i] * 4.0)
    ado.atomic_add(counts, b, 1)
    ado.atomic_add(sums, b, values[i])
    ado.atomic_max(top, 0, b)
    order[i] = ado.atomic_add(ticket, 0, 1)        # the old value is used


@pytest.mark.parametrize("workers", [1, 2])
def test_user_atomics_stay_exact_on_one_thread_and_many(workers):
    rng = np.random.default_rng(5)
    values = rng.uniform(0, 1, 5000)
    counts, sums, top, ticket = np.zeros(4, np.int32), np.zeros(4), np.zeros(1, np.int32), np.zeros(1, np.int64)
    order = np.zeros(len(values), np.int64)
    histogram(values, counts, sums, order, top, ticket, grid=len(values), device=HostDevice(workers=workers))
    bins = (values * 4.0).astype(np.int32)
    np.testing.assert_array_equal(counts, np.bincount(bins, minlength=4))
    np.testing.assert_allclose(sums, np.bincount(bins, values, minlength=4), rtol=1e-12)
    assert top[0] == bins.max() and ticket[0] == len(values)
    np.testing.assert_array_equal(np.sort(order), np.arange(len(values)))
    if workers == 1:
        np.testing.assert_array_equal(order, np.arange(len(values)))     # one thread: in thread order
        assert any(v.get("serial") for v in _variants(histogram))


ATOMICS = r"""
define void @body(i64 %tid0, ptr %p, ptr %q, <2 x half> %h, ptr %status) {
  %a = atomicrmw fadd ptr %p, double 1.0 monotonic, align 8
  %b = atomicrmw volatile add ptr %q, i32 1 monotonic, align 4
  %c = atomicrmw umax ptr %q, i32 7 seq_cst, align 4
  %d = atomicrmw fmax ptr %p, double 2.0 monotonic, align 8
  %e = atomicrmw fadd ptr %p, <2 x half> %h monotonic, align 4
  %f = atomicrmw xchg ptr %status, i64 1 monotonic, align 8
  %g = fadd double %a, 1.0
  store double %g, ptr %p, align 8
  ret void
}
"""


def test_plain_atomics_rewrites_only_what_it_can_say_plainly():
    text, count = plain_atomics(ATOMICS, "body")
    assert count == 3                                     # fadd double, umax, xchg
    assert "atomicrmw volatile add" in text and "atomicrmw fmax" in text and "<2 x half>" in text
    assert "atomicrmw fadd ptr %p, double" not in text and "atomicrmw umax" not in text
    assert "atomicrmw xchg" not in text
    assert plain_atomics(ATOMICS, "other")[1] == 0
    assert has_update_atomics(ATOMICS) and not has_update_atomics(
        "define void @f(ptr %s) {\n  %x = atomicrmw xchg ptr %s, i64 1 monotonic\n  ret void\n}\n")


HELPER_ATOMICS = r"""
define internal void @"adoffload.uniform_fadd.f64"(ptr %p, double %v) {
  %old = atomicrmw fadd ptr %p, double %v monotonic, align 8, !adoffload.loc !0
  ret void
}

define void @body(i64 %tid0, ptr %p, ptr %q, ptr %status) {
entry:
  %0 = atomicrmw fsub ptr %p, double -0.000000e+00 monotonic, align 8, !noalias !2, !adoffload.loc !0
  %1 = atomicrmw min ptr %q, i64 %tid0 syncscope("singlethread") acquire, align 8
  %"a b" = atomicrmw xchg ptr %status, i64 1 monotonic, align 8
  %2 = atomicrmw and ptr %q, i64 3 monotonic, align 8
  call void @"adoffload.uniform_fadd.f64"(ptr %p, double 1.0)
  %s = fadd double %0, 1.0
  %t = add i64 %1, %2
  store i64 %t, ptr %q, align 8
  ret void
}

define void @other(ptr %p) {
  %x = atomicrmw fadd ptr %p, double 1.0 monotonic, align 8
  ret void
}

!0 = !{!"k.py", i32 3, i32 4}
!1 = distinct !{!1}
!2 = !{!3}
!3 = distinct !{!3, !1}
"""


@pytest.mark.parametrize("keep_xchg", [False, True])
@pytest.mark.parametrize("text", [ATOMICS, HELPER_ATOMICS], ids=["atomics", "helpers"])
def test_plain_atomics_on_the_text_rewrite_what_the_ir_path_does(text, keep_xchg):
    """The text rewrite (the usual path, no import) and the ir.core one give the same instructions,
    function by function, and the same count; the text keeps the rest of the module as it was."""
    import llvmlite.binding as llvm
    from adoffload import ir
    from adoffload.codegen.host import serial
    fast = serial._plain_atomics_text(text, "body", keep_xchg)
    assert fast is not None
    slow = serial._plain_atomics_ir(text, "body", keep_xchg)
    assert fast[1] == slow[1] > 0
    llvm.parse_assembly(fast[0]).verify()
    assert plain_atomics(text, "body", keep_xchg) == fast
    a, b = ir.import_module(fast[0]), ir.import_module(slow[0])
    for name, fn in a.functions.items():
        assert [(i.opcode, str(i.type)) for i in fn.instructions()] == \
            [(i.opcode, str(i.type)) for i in b.functions[name].instructions()], name
    if "@other" in text:
        assert "atomicrmw fadd ptr %p, double 1.0 monotonic" in fast[0]     # @other is not the body's
    assert ("atomicrmw xchg" in fast[0]) == keep_xchg


def test_plain_atomics_leave_a_line_they_cannot_read_to_the_ir_path():
    text = ATOMICS.replace("atomicrmw fadd ptr %p, double 1.0", "atomicrmw fadd ptr getelementptr (i8, ptr @g, i64 8), double 1.0")
    text = "@g = global [2 x double] zeroinitializer\n" + text
    from adoffload.codegen.host import serial
    assert serial._plain_atomics_text(text, "body", False) is None
    out, count = plain_atomics(text, "body")
    assert count == 3 and "atomicrmw fadd ptr getelementptr" not in out


# ---- which adjoints may be structural zeros (enzyme/zero_adjoints.py, exit_block)

def _marked_in_reverse(pyfunc, wrt, monkeypatch):
    """(marked with the reverse sweep's exit block, marked without it) as the engine computes them
    while it builds the reverse of a fresh kernel of ``pyfunc``, and that reverse kernel."""
    import importlib
    reverse_module = importlib.import_module("adoffload.enzyme.reverse")   # (the package exports a function of that name)
    from adoffload.enzyme.zero_adjoints import maybe_zero_adjoints
    seen = []

    def recording(blocks, exit_block=None):
        found = maybe_zero_adjoints(blocks, exit_block)
        seen.append((found, maybe_zero_adjoints(blocks), blocks))
        return found
    monkeypatch.setattr(reverse_module, "maybe_zero_adjoints", recording)
    kernel = ado.vjp(ado.kernel(pyfunc), wrt)
    kernel.module_text()
    assert len(seen) == 1
    return seen[0]


def _conditional_sum_source(x: ado.In[ado.f64, 2], out: ado.Out[ado.f64]):
    i = ado.tid()
    e = 0.0
    for k in range(x.shape[1]):
        s = ado.exp(x[i, k])            # inf past 709.8; its adjoint is zero where the branch is not taken
        if x[i, k] < 700.0:             # enough work that LLVM keeps the branch (no select)
            t = x[i, k]
            e += s * t / (1.0 + t * t) * (2.0 + t) / (3.0 + t)
    out[i] = e


_conditional_sum = ado.kernel(_conditional_sum_source)


def test_a_running_sum_always_gets_its_adjoint_a_value_used_under_a_branch_may_not(monkeypatch):
    refined, plain, blocks = _marked_in_reverse(_conditional_sum_source, ["x"], monkeypatch)
    assert refined < plain                              # the sum's chain is no longer marked
    insts = [i for b in blocks for i in b.instructions]
    exp = next(i for i in insts if i.opcode == "call" and "exp" in getattr(i.callee, "name", ""))
    sums = [i for i in insts if i.opcode == "phi" and str(i.type) == "double"]
    assert exp in refined                              # used only under the branch: still strong
    assert sums and not set(sums) & refined             # the running sum e: every path uses it


def test_the_strong_zero_still_guards_the_untaken_branch():
    """x = 800 takes no branch and exp's partial there is inf: the gradient must be 0, not NaN."""
    x = np.array([[800.0, 1.5, 0.2, 0.3], [2.0, 800.0, 900.0, 0.7], [800.0, 800.0, 800.0, 800.0]])
    w = np.array([1.0, -2.0, 0.5])
    f = lambda t: np.exp(t) * t / (1.0 + t * t) * (2.0 + t) / (3.0 + t)      # noqa: E731
    small = np.where(x < 700, x, 0.0)
    h = 1e-6
    expected = np.where(x < 700, (f(small + h) - f(small - h)) / (2 * h), 0.0) * w[:, None]
    for device in (HostDevice(workers=1), "cpu"):
        d_x = np.zeros_like(x)
        ado.vjp(_conditional_sum, ["x"])(x, np.zeros(3), d_x=d_x, d_out=w.copy(), grid=3, device=device)
        assert np.all(np.isfinite(d_x)), d_x
        np.testing.assert_allclose(d_x, expected, rtol=1e-7, atol=1e-9)
    v = np.random.default_rng(6).normal(size=x.shape) * (x < 700)
    t = np.zeros(3)
    ado.jvp(_conditional_sum, ["x"])(x, np.zeros(3), d_x=v, d_out=t, grid=3)
    assert abs(t @ w - np.sum(v * d_x)) <= 1e-12 * max(1.0, abs(t @ w))


def test_the_user_energy_adjoint_has_strong_products_only_where_the_cutoff_decides():
    """Of the pair energy's reverse, only r2's operands (r2 is used only inside the cutoff) and the
    fdiv rule's own strong zero select: the seed's chain through s6 has plain products."""
    text = ado.vjp(pair_energy, ["pos"]).module_text()
    body = text[text.index("define void @pair_energy.vjp("):]
    body = body[:body.index("\n}\n")]
    assert body.count(" select ") <= 4, body.count(" select ")
