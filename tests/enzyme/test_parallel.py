"""Race-free adjoint accumulation: private (plain), uniform (register sum + one add) and shared
(atomic) shadow updates, checked on the emitted IR and by emulating a grid of threads."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from adoffload.analysis.address_classes import (AddressClass, ParallelInfo, lower_uniform_adds,
    lower_uniform_adds_text, uniform_add_definition)
from adoffload.ir import export_module

from .test_reverse_support import ACTIVE, CONST, DUP, compile_host, derive


def _reverse_text(module, result):
    return export_module(module).split(f'@"{result.function.name}"')[1]


def _grid_check(src, activity, make_args, threads, seed=0, h=1e-6, concurrent=False):
    """Run the body for every tid (arg 0) and compare the summed adjoint with finite differences
    of L = <seed, arrays after all threads> + sum over threads of dret * f (if it returns)."""
    module, result = derive(src, "f", activity, canonical=False, parallel=ParallelInfo((0,)))
    lower_uniform_adds(module, "host")
    fns = compile_host(module, ["f", result.function.name])
    rng = np.random.default_rng(seed)
    args = make_args()
    seeds = [rng.standard_normal(a.shape) if isinstance(a, np.ndarray) and act is DUP else None
             for a, act in zip(args, activity)]

    def objective(values):
        values = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
        for t in range(threads):
            fns["f"](t, *values[1:])
        return sum(float(np.dot(s.ravel(), v.ravel())) for s, v in zip(seeds, values) if s is not None)

    shadows = [s.copy() if s is not None else np.zeros(1) for s, act in zip(seeds, activity) if act is not CONST]
    primal = [a.copy() if isinstance(a, np.ndarray) else a for a in args]

    def body(t):
        fns[result.function.name](t, *primal[1:], *shadows)

    if concurrent:
        workers = [threading.Thread(target=lambda t=t: [body(t) for _ in range(1)]) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    else:
        for t in range(threads):
            body(t)
    k = 0
    for i, (a, act) in enumerate(zip(args, activity)):
        if act is CONST:
            continue
        got = shadows[k]
        k += 1
        if not isinstance(a, np.ndarray):
            up, down = list(args), list(args)
            up[i] += h
            down[i] -= h
            want = np.array([(objective(up) - objective(down)) / (2 * h)])
        else:
            want = np.zeros_like(a)
            for e in range(a.size):
                up = [v.copy() if isinstance(v, np.ndarray) else v for v in args]
                down = [v.copy() if isinstance(v, np.ndarray) else v for v in args]
                up[i].ravel()[e] += h
                down[i].ravel()[e] -= h
                want.ravel()[e] = (objective(up) - objective(down)) / (2 * h)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8, err_msg=f"gradient of argument {i}")
    return module, result


# out[tid] = x[tid]^2 * w[0]  -- x, out private per thread; w[0] uniform
PRIVATE_AND_UNIFORM = """
define void @f(i64 %tid, ptr %x, ptr %w, ptr %out) {
entry:
  %px = getelementptr double, ptr %x, i64 %tid
  %v = load double, ptr %px
  %wv = load double, ptr %w
  %sq = fmul double %v, %v
  %r = fmul double %sq, %wv
  %po = getelementptr double, ptr %out, i64 %tid
  store double %r, ptr %po
  ret void
}
"""


def test_private_and_uniform_accumulation():
    module, result = _grid_check(PRIVATE_AND_UNIFORM, [CONST, DUP, DUP, DUP],
                                 lambda: [0, np.array([0.5, -1.2, 2.0, 0.3]), np.array([1.7]), np.zeros(4)], 4)
    text = _reverse_text(module, result)
    assert "atomicrmw" not in text.split("adoffload.uniform_fadd")[0]   # x and out: plain updates


def test_uniform_is_summed_in_a_register_then_added_once():
    module, result = derive(PRIVATE_AND_UNIFORM, "f", [CONST, DUP, DUP, DUP], canonical=False,
                            parallel=ParallelInfo((0,)))
    text = export_module(module)
    body = text.split('define void @"f.reverse"')[1]
    assert body.count("call void @\"adoffload.uniform_fadd.f64\"") == 1 and "atomicrmw" not in body


# out[idx[tid]] += x[tid] * x[idx[tid]]  -- a gather and a scatter with repeated indices
GATHER_SCATTER = """
define void @f(i64 %tid, ptr %x, ptr %idx, ptr %out) {
entry:
  %pi = getelementptr i64, ptr %idx, i64 %tid
  %j = load i64, ptr %pi
  %px = getelementptr double, ptr %x, i64 %tid
  %v = load double, ptr %px
  %pg = getelementptr double, ptr %x, i64 %j
  %g = load double, ptr %pg
  %m = fmul double %v, %g
  %po = getelementptr double, ptr %out, i64 %j
  %o = atomicrmw fadd ptr %po, double %m monotonic
  ret void
}
"""


@pytest.mark.parametrize("concurrent", [False, True])
def test_gather_with_repeated_indices_is_atomic(concurrent):
    idx = np.array([2, 0, 2, 2, 1, 0], dtype=np.int64)
    x = np.array([0.4, -1.1, 0.9, 1.6, -0.2, 0.7])
    module, result = _grid_check(GATHER_SCATTER, [CONST, DUP, CONST, DUP],
                                 lambda: [0, x.copy(), idx, np.zeros(3)], 6, concurrent=concurrent)
    text = _reverse_text(module, result)
    # the primal's reduction, the gather's adjoint, and x[tid]'s adjoint: another thread's
    # gather may add into the same element of d_x, so that update must be atomic too
    assert text.count("atomicrmw fadd") == 3


ROW_MAJOR = """
define void @f(i64 %t0, i64 %t1, ptr %x, i64 %s0, i64 %s1, ptr %out) {
entry:
  %ok = icmp ult i64 %t1, %s1
  br i1 %ok, label %body, label %oob
body:
  %row = mul i64 %t0, %s1
  %k = add i64 %row, %t1
  %p = getelementptr double, ptr %x, i64 %k
  %v = load double, ptr %p
  %sq = fmul double %v, %v
  %po = getelementptr double, ptr %out, i64 %k
  store double %sq, ptr %po
  ret void
oob:
  ret void
}
"""


def test_two_dimensional_grid_with_bounds_check_is_private():
    module, result = derive(ROW_MAJOR, "f", [CONST, CONST, DUP, CONST, CONST, DUP], canonical=False,
                            parallel=ParallelInfo((0, 1)))
    assert "atomicrmw" not in _reverse_text(module, result)
    unchecked = ROW_MAJOR.replace("br i1 %ok, label %body, label %oob", "br label %body")
    module, result = derive(unchecked, "f", [CONST, CONST, DUP, CONST, CONST, DUP], canonical=False,
                            parallel=ParallelInfo((0, 1)))
    assert "atomicrmw fadd" in _reverse_text(module, result)     # no proof that t1 < s1: atomic


@pytest.mark.parametrize("index, expected", [
    ("mul i64 %tid, 3", AddressClass.PRIVATE),
    ("add i64 %tid, %n", AddressClass.PRIVATE),
    ("add i64 %n, 2", AddressClass.UNIFORM),
    ("mul i64 %tid, %n", AddressClass.SHARED),        # stride not known nonzero
    ("and i64 %tid, 7", AddressClass.SHARED),
])
def test_address_classes(index, expected):
    src = f"""
define void @f(i64 %tid, i64 %n, ptr %x) {{
entry:
  %k = {index}
  %p = getelementptr double, ptr %x, i64 %k
  %v = load double, ptr %p
  %sq = fmul double %v, %v
  store double %sq, ptr %p
  ret void
}}
"""
    from adoffload.analysis.address_classes import AddressClassifier
    from adoffload.analysis.control_flow import Dominators, reachable_blocks
    from adoffload.ir import import_module
    module = import_module(src)
    fn = module["f"]
    classifier = AddressClassifier(ParallelInfo((0,)), Dominators(reachable_blocks(fn)), fn.args)
    gep = next(i for i in fn.instructions() if i.opcode == "getelementptr")
    got = classifier.classify(gep, gep.parent)
    assert got is expected


def test_active_scalar_is_a_uniform_add():
    src = """
define double @f(i64 %tid, ptr %x, double %s) {
entry:
  %p = getelementptr double, ptr %x, i64 %tid
  %v = load double, ptr %p
  %r = fmul double %v, %s
  ret double %r
}
"""
    module, result = derive(src, "f", [CONST, DUP, ACTIVE], canonical=False, parallel=ParallelInfo((0,)))
    lower_uniform_adds(module, "host")
    fns = compile_host(module, ["f", result.function.name])
    x, dx, ds = np.array([0.5, 2.0, -1.0]), np.zeros(3), np.zeros(1)
    for t in range(3):
        fns[result.function.name](t, x, 1.5, dx, ds, 1.0)
    np.testing.assert_allclose(ds, [x.sum()])
    np.testing.assert_allclose(dx, np.full(3, 1.5))


def test_text_lowering_replaces_declarations():
    text = ('declare void @"adoffload.uniform_fadd.f64"(ptr %a0, double %a1)\n'
            'declare void @"adoffload.uniform_fadd.f32"(ptr %a0, float %a1)\n')
    lowered = lower_uniform_adds_text(text, "nvptx")
    assert lowered.count("declare i32 @llvm.nvvm.activemask()") == 1
    assert 'define internal void @"adoffload.uniform_fadd.f64"' in lowered
    assert "declare void @\"adoffload" not in lowered


def _ptxas_available():
    try:
        from adoffload.codegen.gpu.tools import find_ptxas
        find_ptxas()
        return True
    except Exception:
        return False


@pytest.mark.skipif(not _ptxas_available(), reason="ptxas not installed")
@pytest.mark.parametrize("kind, suffix", [("float", "f32"), ("double", "f64")])
def test_nvptx_warp_reduction_assembles(kind, suffix):
    from adoffload.codegen.gpu.nvptx import compile_ptx, ptxas_check
    text = uniform_add_definition(f"adoffload.uniform_fadd.{suffix}", "nvptx") + f"""
define ptx_kernel void @k(ptr %p, {kind} %v) {{
  call void @"adoffload.uniform_fadd.{suffix}"(ptr %p, {kind} %v)
  ret void
}}
"""
    ptx = compile_ptx(text, "sm_80", kernels=["k"])
    assert ptx.count("shfl.sync.down") == (5 if kind == "float" else 10)
    assert "activemask" in ptx and "match.any.sync.b64" in ptx    # the tree only where all lanes share p
    ptxas_check(ptx, "sm_80")


OFFSET_READS = """
define void @f(i64 %tid, ptr %y, ptr %out) {
entry:
  %p0 = getelementptr double, ptr %y, i64 %tid
  %a = load double, ptr %p0
  %t1 = add i64 %tid, 1
  %p1 = getelementptr double, ptr %y, i64 %t1
  %b = load double, ptr %p1
  %d = fsub double %b, %a
  %po = getelementptr double, ptr %out, i64 %tid
  store double %d, ptr %po
  ret void
}
"""


def test_offset_reads_of_one_array_accumulate_atomically():
    # y[i] and y[i + 1] are each injective in the thread index, yet thread i's y[i + 1] is
    # thread i+1's y[i]: plain adds would race (seen on an H200 before this rule).
    module, result = _grid_check(OFFSET_READS, [CONST, DUP, DUP],
                                 lambda: [0, np.linspace(0.1, 1.0, 7), np.zeros(6)], 6, concurrent=True)
    assert _reverse_text(module, result).count("atomicrmw fadd") == 2


def test_an_access_wider_than_its_element_is_not_private():
    # a <2 x double> load at x[tid] also reads x[tid + 1], which thread tid+1 updates too
    src = """
define void @f(i64 %tid, ptr %x, ptr %out) {
entry:
  %p = getelementptr double, ptr %x, i64 %tid
  %v = load <2 x double>, ptr %p
  %a = extractelement <2 x double> %v, i64 0
  %b = extractelement <2 x double> %v, i64 1
  %s = fadd double %a, %b
  %po = getelementptr double, ptr %out, i64 %tid
  store double %s, ptr %po
  ret void
}
"""
    from adoffload.analysis.address_classes import AddressClassifier
    from adoffload.analysis.control_flow import Dominators, reachable_blocks
    from adoffload.ir import import_module
    fn = import_module(src)["f"]
    classifier = AddressClassifier(ParallelInfo((0,)), Dominators(reachable_blocks(fn)), fn.args, function=fn)
    x_gep, out_gep = [i for i in fn.instructions() if i.opcode == "getelementptr"]
    assert classifier.classify(x_gep, x_gep.parent) is AddressClass.SHARED
    assert classifier.classify(out_gep, out_gep.parent) is AddressClass.PRIVATE


# out[tid] = sum_k w[k] * x[tid*m + k]: every thread adds into d_w[k] at iteration k
WEIGHTS = """
define void @f(i64 %tid, i64 %m, ptr %x, ptr %w, ptr %out) {
entry:
  %row = mul i64 %tid, %m
  br label %loop
loop:
  %k = phi i64 [0, %entry], [%k1, %loop]
  %acc = phi double [0.0, %entry], [%acc1, %loop]
  %pw = getelementptr double, ptr %w, i64 %k
  %wk = load double, ptr %pw
  %s = add i64 %row, %k
  %px = getelementptr double, ptr %x, i64 %s
  %xk = load double, ptr %px
  %t = fmul double %wk, %xk
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
def test_a_loop_counter_address_is_combined_across_lanes(concurrent):
    # d_w[k] is the same for every thread at iteration k: the uniform add (lanes combined where
    # they share the address, checked at run time), not one contended atomic per thread
    module, result = _grid_check(WEIGHTS, [CONST, CONST, DUP, DUP, DUP],
                                 lambda: [0, 3, np.linspace(-1.0, 1.5, 15), np.array([0.5, -2.0, 1.25]),
                                          np.zeros(5)], 5, concurrent=concurrent)
    body = _reverse_text(module, result).split("\n}\n")[0]
    # d_w[k]: the uniform add; d_x[tid*m + k] (stride m not known nonzero): an atomic
    assert body.count('call void @"adoffload.uniform_fadd.f64"') == 1 and body.count("atomicrmw fadd") == 1


def test_a_row_through_two_geps_is_private():
    # x[tid, k] as gep(gep(x, tid * s1), k) with k < s1 checked: thread tid's own row
    src = ROW_MAJOR.replace("""  %row = mul i64 %t0, %s1
  %k = add i64 %row, %t1
  %p = getelementptr double, ptr %x, i64 %k""", """  %row = mul i64 %t0, %s1
  %k = add i64 %row, %t1
  %base = getelementptr double, ptr %x, i64 %row
  %p = getelementptr double, ptr %base, i64 %t1""")
    module, result = derive(src, "f", [CONST, CONST, DUP, CONST, CONST, DUP], canonical=False,
                            parallel=ParallelInfo((0, 1)))
    assert "atomicrmw" not in _reverse_text(module, result)
    unchecked = src.replace("br i1 %ok, label %body, label %oob", "br label %body")
    module, result = derive(unchecked, "f", [CONST, CONST, DUP, CONST, CONST, DUP], canonical=False,
                            parallel=ParallelInfo((0, 1)))
    assert "atomicrmw fadd" in _reverse_text(module, result)     # no proof that t1 < s1: atomic


@pytest.mark.parametrize("other", [
    "%q0 = getelementptr double, ptr %x, i64 %tid\n  %q = getelementptr i8, ptr %q0, i64 8",   # clang's u[i + 1]
    "%q = select i1 %c, ptr %x, ptr %out",                                                  # maybe x
    "%q = load ptr, ptr %table",                                                            # from anywhere
])
def test_an_element_reached_another_way_is_not_private(other):
    """x[tid] is thread tid's only if no other access reaches x: one through a byte offset (clang
    -O2 writes u[i + 1] as ``gep i8, (gep double, u, i), 8``), a select or a loaded pointer may be
    another thread's x[tid]. The CUDA source of RAJAPerf's lcals_eos lost gradient contributions
    on an H200 that way (plain adds at d_u[i] racing with neighbours' atomics)."""
    src = f"""
define void @f(i64 %tid, ptr %x, ptr %out, ptr %table, i1 %c) {{
entry:
  %p = getelementptr double, ptr %x, i64 %tid
  %v = load double, ptr %p
  {other}
  %w = load double, ptr %q
  %s = fadd double %v, %w
  %po = getelementptr double, ptr %out, i64 %tid
  store double %s, ptr %po
  ret void
}}
"""
    from adoffload.analysis.address_classes import AddressClassifier
    from adoffload.analysis.control_flow import Dominators, reachable_blocks
    from adoffload.ir import import_module
    fn = import_module(src)["f"]
    classifier = AddressClassifier(ParallelInfo((0,)), Dominators(reachable_blocks(fn)), fn.args, function=fn)
    x_gep = next(i for i in fn.instructions() if i.opcode == "getelementptr")
    assert classifier.classify(x_gep, x_gep.parent) is AddressClass.SHARED
    out_gep = [i for i in fn.instructions() if i.opcode == "getelementptr"][-1]
    private_out = "select" not in other and "load ptr" not in other      # out may be the other pointer
    assert (classifier.classify(out_gep, out_gep.parent) is AddressClass.PRIVATE) == private_out


# t = local double[2][2] (a row through an i8 GEP, then its element: clang's and our front end's form);
# out[tid] = sum over t's elements squared, t[r][c] = x[tid] * (r + c + 1)
LOCAL_ROWS = """
define void @f(i64 %tid, ptr %x, ptr %out) {
entry:
  %t = alloca [4 x double]
  %px = getelementptr double, ptr %x, i64 %tid
  %v = load double, ptr %px
  br label %loop
loop:
  %r = phi i64 [ 0, %entry ], [ %r.next, %loop ]
  %acc = phi double [ 0.0, %entry ], [ %acc.next, %loop ]
  %off = shl i64 %r, 4
  %row = getelementptr i8, ptr %t, i64 %off
  %e0 = getelementptr double, ptr %row, i64 0
  %e1 = getelementptr double, ptr %row, i64 1
  %rf = sitofp i64 %r to double
  %w0 = fadd double %rf, 1.0
  %w1 = fadd double %rf, 2.0
  %a0 = fmul double %v, %w0
  %a1 = fmul double %v, %w1
  store double %a0, ptr %e0
  store double %a1, ptr %e1
  %l0 = load double, ptr %e0
  %l1 = load double, ptr %e1
  %s0 = fmul double %l0, %l0
  %s1 = fmul double %l1, %l1
  %s = fadd double %s0, %s1
  %acc.next = fadd double %acc, %s
  %r.next = add i64 %r, 1
  %more = icmp slt i64 %r.next, 2
  br i1 %more, label %loop, label %done
done:
  %po = getelementptr double, ptr %out, i64 %tid
  store double %acc.next, ptr %po
  ret void
}
"""


def test_a_local_array_reached_through_mixed_geps_is_private():
    # the shadow of a thread's own stack array takes plain adds however its element is addressed
    # (atomics there kept a register tile's adjoint in local memory: the SGEMM's d_acc)
    module, result = _grid_check(LOCAL_ROWS, [CONST, DUP, DUP], lambda: [0, np.linspace(0.2, 1.0, 5), np.zeros(5)], 5,
                                 concurrent=True)
    assert "atomicrmw" not in _reverse_text(module, result)
