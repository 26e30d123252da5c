"""Counting functions run the primal's control slice (enzyme/control_slice.py), not the whole primal.

The property: on random C programs (testing/cprograms.py: data-dependent loop bounds, ``break`` on
data, recurrences through memory, in-place updates, heap scratch, helpers), compiled by clang at
several levels, a counting function that adds a distinct number of bytes for every block of the
primal counts the same with the slice as with the full clone, at random points; and so do
hand-written programs whose branches read memory the function writes (the slice must keep those
writes) or pass it to a call it cannot see into (the slice must refuse). Then: llm.c-style nests
over runtime B, T, C become closed forms (no loop left in the optimized counting function).
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm
import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.enzyme import api, tape
from adoffload.enzyme.control_slice import control_slice
from adoffload.enzyme.counting import add_counting_function
from adoffload.enzyme.host import compile_host
from adoffload.errors import Error
from adoffload.ir.core import Function
from adoffload.testing import differential
from adoffload.testing.cprograms import INT, generate, module_source
from adoffload.testing.program_checks import Point

pytestmark = pytest.mark.skipif(not differential.clang_available(),
                                reason="the ziglang wheel (the clang these tests compile C with) is not installed")

HEADER = "#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n#include <stdio.h>\n"


def _counters(fn: Function) -> list[tuple[str, dict[int, int]]]:
    """Two counters over every block, with distinct weights, so a single wrong visit shows."""
    n = len(fn.blocks)
    return [("a", {k: 8 * (k + 1) for k in range(n)}), ("b", {k: 8 * (n - k) * (k % 3) for k in range(n)})]


def _pair(module, fn: Function):
    counters = _counters(fn)
    full = add_counting_function(module, fn, f"{fn.name}.count.full", counters, control_slice=False)
    sliced = add_counting_function(module, fn, f"{fn.name}.count.sliced", counters)
    return full.name, sliced.name


def _run(count, args) -> tuple[int, int]:
    a, b = np.zeros(1, np.int64), np.zeros(1, np.int64)
    count(*[x.copy() if isinstance(x, np.ndarray) else x for x in args], a, b)
    return int(a[0]), int(b[0])


def _kind(fn: Function) -> str:
    """How the slice treats ``fn``: refused, keeps writes (a branch reads memory the function
    writes: stores, atomics or calls that write), or keeps only control."""
    keep = control_slice(fn)
    if keep is None:
        return "refused"
    writes = any(i.opcode in ("store", "atomicrmw", "cmpxchg") or i.opcode == "call"
                 and not getattr(i.callee, "name", "").startswith("llvm.") for i in keep)
    return "keeps writes" if writes else "control only"


def _load(programs, opt):
    """The programs' module, or each program alone where the batch does not load (a refused one)."""
    try:
        return [(ado.from_llvm(differential.compile_c(module_source(programs), opt)).ir, programs)]
    except Error:
        loaded = []
        for p in programs:
            try:
                loaded.append((ado.from_llvm(differential.compile_c(module_source([p]), opt)).ir, [p]))
            except Error:
                pass
        return loaded


@pytest.mark.parametrize("opt", [0, 1, 2, 3])
def test_random_c_programs_count_the_same_with_the_slice(opt):
    kinds: dict[str, int] = {}
    compared = 0
    programs = [generate(seed) for seed in range(1000 + 100 * opt, 1000 + 100 * opt + 60)]
    for start in range(0, len(programs), 20):
        for module, batch in _load(programs[start:start + 20], opt):
            names = {}
            for p in batch:
                fn = module.functions[p.name]
                kinds[_kind(fn)] = kinds.get(_kind(fn), 0) + 1
                names[p.name] = _pair(module, fn)
            funcs = compile_host(module, [n for pair in names.values() for n in pair], opt_level=2, codegen_level=0)
            for p in batch:
                full, sliced = (funcs[n] for n in names[p.name])
                rng = np.random.default_rng(p.seed)
                for _ in range(3):
                    args = Point(p, rng).args()
                    assert _run(sliced, args) == _run(full, args), (p.name, opt, p.features)
                    compared += 1
    assert compared >= 150
    # the property is not vacuous: most programs are sliced, and some slices keep writes a branch reads
    assert kinds.get("control only", 0) + kinds.get("keeps writes", 0) >= 0.6 * sum(kinds.values()), kinds
    assert kinds.get("keeps writes", 0) >= 1, kinds


MEMORY_BRANCHES = HEADER + r"""
/* a loop bound read from memory written earlier in the function (its own heap block) */
double through_heap(const double* x, int n) {
    int* keep = (int*)malloc((size_t)n * sizeof(int));
    int m = 0;
    for (int i = 0; i < n; i++) if (x[i] > 0.0) keep[m++] = i;
    double s = 0.0;
    for (int j = 0; j < m; j++)
        for (int k = 0; k <= keep[j]; k++) s += x[k] * x[keep[j]];
    free(keep);
    return s;
}

/* branches on an array the function updates in place */
void in_place(double* y, int n) {
    for (int it = 0; it < 4; it++)
        for (int i = 0; i < n; i++) y[i] = y[i] > 0.25 ? y[i] * 0.5 - 0.1 : y[i] + 0.3;
    for (int i = 0; i < n; i++) {
        int steps = 0;
        while (y[i] > 0.0 && steps < 8) { y[i] -= 0.2; steps++; }
    }
}

/* a while loop on a float recurrence kept in a local array */
double local_array(double a, int n) {
    double t[16];
    for (int i = 0; i < 16; i++) t[i] = a * (i + 1);
    double s = 0.0;
    int i = 0;
    while (i < 15 && t[i] < 3.0) { t[i + 1] += t[i]; s += sin(t[i]); i++; }
    for (int j = 0; j < n && j < i; j++) s += t[j];
    return s;
}

/* the bound comes back from a call with unknown memory effects: the slice must refuse, not guess */
double through_unknown_call(const double* x, int n) {
    char digits[16];
    int len = snprintf(digits, sizeof digits, "%d", n);
    double s = 0.0;
    for (int i = 0; i < len && i < n; i++) s += x[i] * (digits[i] - '0');
    return s;
}
"""


@pytest.mark.parametrize("opt", [0, 1, 2])
def test_branches_on_memory_the_function_writes_keep_those_writes(opt):
    module = ado.from_c(MEMORY_BRANCHES, opt=opt).ir
    rng = np.random.default_rng(opt)
    cases = {
        "through_heap": lambda n: (rng.uniform(-1, 1, n), n),
        "in_place": lambda n: (rng.uniform(-1, 1, n), n),
        "local_array": lambda n: (float(rng.uniform(0.05, 0.5)), n),
        "through_unknown_call": lambda n: (rng.uniform(-1, 1, n), n),
    }
    names = {f: _pair(module, module.functions[f]) for f in cases}
    funcs = compile_host(module, [n for pair in names.values() for n in pair], opt_level=2, codegen_level=0)
    for f, draw in cases.items():
        for n in (1, 3, 7, 12):
            args = draw(n)
            full, sliced = (funcs[name] for name in names[f])
            assert _run(sliced, args) == _run(full, args), (f, n, opt)
    assert _kind(module.functions["through_heap"]) == "keeps writes"
    assert _kind(module.functions["in_place"]) == "keeps writes"
    assert _kind(module.functions["through_unknown_call"]) == "refused"


def test_a_slice_drops_the_float_work_and_the_stores():
    """Branches on arguments only: every load, store and float instruction goes."""
    module = ado.from_c(HEADER + LAYERNORM.replace("RESTRICT", ""), opt=2).ir
    fn = module.functions["layernorm_forward"]
    keep = control_slice(fn)
    assert keep is not None
    assert not [i for i in keep if i.opcode in ("load", "store", "call") or i.type.is_float
                or getattr(i.type, "element", None) is not None and i.type.element.is_float]
    assert len(keep) < len(list(fn.instructions())) / 2


LAYERNORM = r"""
void layernorm_forward(float* RESTRICT out, float* RESTRICT mean, float* RESTRICT rstd, const float* RESTRICT inp,
                       const float* RESTRICT weight, const float* RESTRICT bias, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float* x = inp + b * T * C + t * C;
            float m = 0.0f;
            for (int i = 0; i < C; i++) m += x[i];
            m = m / C;
            float v = 0.0f;
            for (int i = 0; i < C; i++) { float xshift = x[i] - m; v += xshift * xshift; }
            v = v / C;
            float s = 1.0f / sqrtf(v + 1e-5f);
            float* out_bt = out + b * T * C + t * C;
            for (int i = 0; i < C; i++) out_bt[i] = (s * (x[i] - m)) * weight[i] + bias[i];
            mean[b * T + t] = m;
            rstd[b * T + t] = s;
        }
}
"""

MATMUL = r"""
void matmul_forward(float* RESTRICT out, const float* RESTRICT inp, const float* RESTRICT weight,
                    const float* RESTRICT bias, int B, int T, int C, int OC) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float* inp_bt = inp + b * T * C + t * C;
            float* out_bt = out + b * T * OC + t * OC;
            for (int o = 0; o < OC; o++) {
                float val = bias[o];
                const float* wrow = weight + o * C;
                for (int i = 0; i < C; i++) val += inp_bt[i] * wrow[i];
                out_bt[o] = tanhf(val);
            }
        }
}
"""


def back_edges(ir_text: str, name: str) -> list[tuple[str, str]]:
    """The back edges of ``name``'s CFG in optimized LLVM text (a depth-first walk)."""
    fn = llvm.parse_assembly(ir_text).get_function(name)
    succ = {}
    for block in fn.blocks:
        term = list(block.instructions)[-1]
        succ[block.name] = [str(o.name) for o in term.operands if str(o.type) == "label"]
    start = next(iter(succ))
    state, back, stack = {start: 1}, [], [(start, iter(succ[start]))]
    while stack:
        block, it = stack[-1]
        following = next(it, None)
        if following is None:
            state[block] = 2
            stack.pop()
        elif state.get(following) == 1:
            back.append((block, following))
        elif following not in state:
            state[following] = 1
            stack.append((following, iter(succ[following])))
    return back


def _reverse_count(source: str, fname: str, opt: int, args, monkeypatch):
    """The counting HostFunction of ``fname``'s reverse through ez.autodiff, and the bytes per block
    it was built with (recorded on the way)."""
    api._CACHE.clear()
    recorded = []
    original = tape.add_counting_function

    def recording(module, primal, name, counters, **options):
        recorded.append(counters)
        return original(module, primal, name, counters, **options)
    monkeypatch.setattr(tape, "add_counting_function", recording)
    fn = ado.from_c(HEADER + source, opt=opt)[fname]
    ez.autodiff(ez.Reverse, fn, *args)
    (_, _, count), = [v for k, v in api._CACHE.items() if k[1] == fname]
    return count, recorded[-1]


def _layernorm_args(B, T, C, rng):
    f = lambda n: rng.standard_normal(n).astype(np.float32)
    return (ez.Duplicated(np.zeros(B * T * C, np.float32), f(B * T * C)), ez.Const(np.zeros(B * T, np.float32)),
            ez.Const(np.zeros(B * T, np.float32)), ez.Duplicated(f(B * T * C), np.zeros(B * T * C, np.float32)),
            ez.Duplicated(f(C), np.zeros(C, np.float32)), ez.Duplicated(f(C), np.zeros(C, np.float32)), B, T, C)


def _matmul_args(B, T, C, OC, rng):
    f = lambda n: rng.standard_normal(n).astype(np.float32)
    z = lambda n: np.zeros(n, np.float32)
    return (ez.Duplicated(z(B * T * OC), f(B * T * OC)), ez.Duplicated(f(B * T * C), z(B * T * C)),
            ez.Duplicated(f(OC * C), z(OC * C)), ez.Duplicated(f(OC), z(OC)), B, T, C, OC)


@pytest.mark.parametrize("opt,restrict", [(1, ""), (1, "__restrict__"), (2, "__restrict__"), (3, "__restrict__")])
def test_llm_c_style_nests_are_sized_in_closed_form(opt, restrict, monkeypatch):
    """For b < B, t < T, i < C with runtime sizes: the optimized counting function has no loop
    (and counts what the full clone counts). Without ``restrict`` at -O2/-O3 clang's vectorized
    loops test at run time whether the arrays overlap; those tests stay branches (the tape does
    depend on them), so one loop over b, t stays -- see docs/ARCHITECTURE.md."""
    rng = np.random.default_rng(opt)
    for source, fname, args in ((LAYERNORM, "layernorm_forward", _layernorm_args(3, 5, 37, rng)),
                                (MATMUL, "matmul_forward", _matmul_args(2, 3, 19, 11, rng))):
        count, counters = _reverse_count(source.replace("RESTRICT", restrict), fname, opt, args, monkeypatch)
        assert count is not None, "expected a dynamic tape"
        assert back_edges(count.program.optimized_ir, count.fn.name) == [], (fname, opt, restrict)
        module = count.fn.parent
        full = add_counting_function(module, module.functions[fname], f"{fname}.full", counters, control_slice=False)
        reference = compile_host(module, [full.name], codegen_level=0)[full.name]
        for sizes in ((1, 1, 1), (2, 7, 33), (4, 1, 64), (3, 0, 5)):
            got, want = np.zeros(1, np.int64), np.zeros(1, np.int64)
            count(*_resize(fname, sizes), got)
            reference(*_resize(fname, sizes), want)
            assert got[0] == want[0], (fname, sizes)
            assert got[0] > 0 or 0 in sizes


def _resize(fname, sizes):
    """Fresh arrays for sizes (B, T, C) (matmul: OC = C + 3)."""
    B, T, C = sizes
    rng = np.random.default_rng(B * 100 + T * 10 + C)
    f = lambda n: rng.standard_normal(n).astype(np.float32)
    if fname == "layernorm_forward":
        return [np.zeros(B * T * C, np.float32), np.zeros(B * T, np.float32), np.zeros(B * T, np.float32),
                f(B * T * C), f(C), f(C), B, T, C]
    OC = C + 3
    return [np.zeros(B * T * OC, np.float32), f(B * T * C), f(OC * C), f(OC), B, T, C, OC]


@ado.kernel
def _walk(x: ado.In[ado.f64], steps: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    acc = x[i]
    for j in range(steps[i]):
        acc = ado.sin(acc) * x[(i + j) % x.shape[0]] + 0.5
    out[i] = acc


def test_a_kernels_counting_kernel_keeps_its_bounds_checks_and_drops_its_math():
    """The counting kernel of a reverse kernel: no float work, but the status record's writes stay
    (a bounds error still fails the counting pass), and the gradient through the sized tape holds."""
    vjp = ado.vjp(_walk, wrt=["x"])
    text = vjp.count_kernel._make_text(frozenset())
    module = llvm.parse_assembly(text)
    count = next(f for f in module.functions if f.name.endswith(".tape_count"))
    opcodes = [i.opcode for b in count.blocks for i in b.instructions]
    assert not {"fmul", "fadd", "call"} & set(opcodes), opcodes
    assert any(i.opcode in ("store", "atomicrmw") and "%status" in str(i) for b in count.blocks for i in b.instructions)
    n = 7
    rng = np.random.default_rng(3)
    x, steps, seed = rng.uniform(0.1, 0.9, n), rng.integers(0, 6, n).astype(np.int64), rng.standard_normal(n)
    d_x = np.zeros(n)
    vjp(x, steps, np.zeros(n), d_x, seed.copy(), grid=n)

    def primal(v):
        out = np.zeros(n)
        _walk(v, steps, out, grid=n)
        return out @ seed
    fd = np.array([(primal(x + 1e-6 * e) - primal(x - 1e-6 * e)) / 2e-6 for e in np.eye(n)])
    np.testing.assert_allclose(d_x, fd, rtol=1e-6, atol=1e-9)


def test_a_kept_heap_block_is_still_freed():
    """A loop bound read from a malloc'd block keeps the malloc, its stores, and its free."""
    module = ado.from_c(MEMORY_BRANCHES, opt=2).ir
    keep = control_slice(module.functions["through_heap"])
    callees = {getattr(i.callee, "name", "") for i in keep if i.opcode == "call"}
    assert {"malloc", "free"} <= callees, callees


@ado.kernel
def _nest(x: ado.In[ado.f64], n: ado.i64, m: ado.i64, out: ado.InOut[ado.f64]):
    i = ado.tid()
    acc = x[i]
    for j in range(n):
        for k in range(m):
            acc = ado.sin(acc) * 0.9 + 0.1
    out[i] = out[i] * 0.5 + acc


def test_a_counting_kernel_on_the_host_folds_a_nest_over_runtime_sizes():
    """The sliced counting kernel has no loop left after the host's O3 (the full clone keeps both:
    ``acc`` reaches ``out``): inlined into its host entry, the only loop left there is the entry's
    own over the chunk's threads (``loop``, unrolled and unswitched: ``loop.prol``, ``loop.us``...),
    none of the nest's (``for.cond...``); the gradient through the tape it sizes matches central
    differences."""
    vjp = ado.vjp(_nest, wrt=["x"])
    counting = vjp.count_kernel
    program = counting.compiled("host").artifact
    edges = back_edges(program.optimized_ir, counting.body_name + ".host")
    assert edges and all(re.fullmatch(r"loop(\.[\w.]+)?", header) for _, header in edges), edges
    n = 5
    x, seed, d_x = np.linspace(0.1, 0.9, n), np.linspace(1.0, 2.0, n), np.zeros(n)
    vjp(x, 3, 4, np.ones(n), d_x, seed.copy(), grid=n)

    def primal(v):
        out = np.ones(n)
        _nest(v, 3, 4, out, grid=n)
        return out @ seed
    fd = np.array([(primal(x + 1e-6 * e) - primal(x - 1e-6 * e)) / 2e-6 for e in np.eye(n)])
    np.testing.assert_allclose(d_x, fd, rtol=1e-6, atol=1e-9)


MATMUL_LINEAR = MATMUL.replace("out_bt[o] = tanhf(val);", "out_bt[o] = val;")


@pytest.mark.parametrize("opt", [1, 2])
def test_llm_c_matmul_needs_no_tape_for_its_counters(opt):
    """clang's rotated loops leave on ``i.next == n``: the reverse sweep restarts each counter at
    ``n - 1`` (control_flow.exit_bound) instead of taping its last value. llm.c's matmul at -O1 then
    has no tape at all; its gradient still matches central differences (and layernorm's, whose
    tape keeps the mean and variance)."""
    from adoffload.enzyme.activity import Activity
    from adoffload.enzyme.reverse import reverse
    module = ado.from_c(HEADER + MATMUL_LINEAR.replace("RESTRICT", ""), opt=opt).ir
    fn = module.functions["matmul_forward"]
    result = reverse(module, fn, [Activity.DUP] * 4 + [Activity.CONST] * 4, name="matmul.rev")
    if opt == 1:
        assert result.tape is None and not result.stats.tape_bytes
    rng = np.random.default_rng(opt)
    for source, fname, args in ((MATMUL_LINEAR, "matmul_forward", _matmul_args(2, 3, 5, 4, rng)),
                                (LAYERNORM, "layernorm_forward", _layernorm_args(2, 3, 6, rng))):
        f = ado.from_c(HEADER + source.replace("RESTRICT", ""), opt=opt)[fname]
        raw = [a.value if isinstance(a, (ez.Const, ez.Duplicated)) else a for a in args]
        seed = args[0].shadow.copy()
        inputs = [k for k, a in enumerate(args) if isinstance(a, ez.Duplicated) and k > 0]
        ez.autodiff(ez.Reverse, f, *args)
        for k in inputs:
            def loss(v, k=k):
                call = [r.copy() if isinstance(r, np.ndarray) else r for r in raw]
                call[k] = v.astype(np.float32)
                f(*call)
                return float(call[0].astype(np.float64) @ seed)
            x = raw[k].astype(np.float64)
            fd = np.array([(loss(x + 1e-2 * e) - loss(x - 1e-2 * e)) / 2e-2 for e in np.eye(x.size)])
            np.testing.assert_allclose(args[k].shadow, fd, rtol=2e-2, atol=2e-2, err_msg=f"{fname} d{k} -O{opt}")
