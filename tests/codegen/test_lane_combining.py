"""Lane combining of atomic adds (codegen/gpu/lane_combining.py): which groups the matcher takes and
refuses, the rewritten code run on this CPU by 32 threads emulating one warp's shuffles and votes
(results and the number of atomics), and the PTX it gives (ptxas accepts it)."""
from __future__ import annotations

import ctypes
import random
import re
import sys
import threading
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import adoffload as ado
from adoffload import ir
from adoffload.codegen.gpu import lane_combining as lc
from adoffload.codegen.gpu import tools
from adoffload.codegen.host.program import HostProgram

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lane_kernels as L  # noqa: E402


# ---- the matcher, on hand-written IR --------------------------------------------------------------

def _ir(*, first="%p0 = getelementptr double, ptr %a, i64 %tid0",
        second="%p1 = getelementptr double, ptr %a, i64 %i1", between="", order="monotonic", use=""):
    return f"""
declare void @opaque()
define void @k(i64 %tid0, ptr %a, ptr %b, i64 %n, double %v, ptr %status) {{
entry:
  %j = trunc i64 %tid0 to i32
  %i1 = add i64 %tid0, 1
  %j1 = add nsw i32 %j, 1
  %j1w = add i32 %j, 1
  {first}
  {second}
  %x0 = atomicrmw fadd ptr %p0, double %v {order}, align 8
  {between}
  %x1 = atomicrmw fadd ptr %p1, double %v monotonic, align 8
  {use}
  ret void
}}
"""


def _groups(text, noalias=True):
    module = ir.import_module(text)
    return lc.find_groups(module.functions["k"], 1, noalias)


def test_a_pair_of_neighbouring_adds_is_a_group():
    (group,) = _groups(_ir())
    assert [s.name for s in group.pivot] == ["x0"]
    assert {d: [s.name for s in v] for d, v in group.others.items()} == {1: ["x1"]}


@pytest.mark.parametrize("first, second", [
    ("%p0 = getelementptr double, ptr %a, i64 %tid0", "%q = getelementptr double, ptr %a, i64 %tid0\n"
     "  %p1 = getelementptr double, ptr %q, i64 1"),                                   # gep(gep(a, i), 1)
    ("%p0 = getelementptr double, ptr %a, i64 %tid0", "%p1 = getelementptr i8, ptr %p0, i64 8"),   # byte offset
    ("%s0 = sext i32 %j to i64\n  %p0 = getelementptr double, ptr %a, i64 %s0",
     "%s1 = sext i32 %j1 to i64\n  %p1 = getelementptr double, ptr %a, i64 %s1"),     # sext of an nsw add
    ("%p0 = getelementptr double, ptr %a, i32 %j", "%p1 = getelementptr double, ptr %a, i32 %j1"),  # i32 index
    ("%p0 = getelementptr double, ptr %a, i64 %i1", "%m = sub i64 %tid0, -2\n"
     "  %p1 = getelementptr double, ptr %a, i64 %m"),                                  # sub of a constant
])
def test_canonical_address_forms_are_groups(first, second):
    assert len(_groups(_ir(first=first, second=second))) == 1


@pytest.mark.parametrize("kwargs", [
    dict(between="store double %v, ptr %a, align 8"),                          # an aliasing store
    dict(between="%l = load double, ptr %a, align 8"),                         # a load of the same array
    dict(between="call void @opaque()"),                                       # an unknown call
    dict(between="fence seq_cst"),
    dict(second="%p1 = getelementptr double, ptr %b, i64 %i1"),                 # another base
    dict(second="%m = add i64 %tid0, %n\n  %p1 = getelementptr double, ptr %a, i64 %m"),   # offset not constant
    dict(second="%m = mul i64 %tid0, 2\n  %p1 = getelementptr double, ptr %a, i64 %m"),    # another index
    dict(use="store double %x0, ptr %b, align 8"),                             # a result used
    dict(order="seq_cst"),
    dict(first="%p0 = getelementptr double, ptr %a, i64 0",
         second="%p1 = getelementptr double, ptr %a, i64 1"),                  # uniform: codegen/gpu/reductions.py's
    dict(second="%p1 = getelementptr i8, ptr %p0, i64 4"),                      # half an element away
    dict(second="%p1 = getelementptr double, ptr %p0, i64 32"),                 # past a warp
    dict(first="%s0 = sext i32 %j to i64\n  %p0 = getelementptr double, ptr %a, i64 %s0",
         second="%s1 = sext i32 %j1w to i64\n  %p1 = getelementptr double, ptr %a, i64 %s1"),   # may wrap
])
def test_groups_that_cannot_be_proven_are_refused(kwargs):
    assert _groups(_ir(**kwargs)) == []


def test_a_gathers_scattered_adds_are_no_group():
    """d_pos[nbr[i], c] (a reverse gather): an index loaded at a thread-dependent address puts neighbouring
    lanes one element apart only by chance, so the shuffles and vote would be paid for nothing."""
    gather = ("%jp = getelementptr i32, ptr %b, i64 %tid0\n  %g = load i32, ptr %jp, align 4\n"
              "  %gs = sext i32 %g to i64\n  %g3 = mul i64 %gs, 3\n  %p0 = getelementptr double, ptr %a, i64 %g3")
    assert _groups(_ir(first=gather, second="%p1 = getelementptr double, ptr %p0, i64 1")) == []
    # an offset loaded from one address for every thread is no gather: tid + offset stays a stencil
    uniform = ("%o = load i64, ptr %b, align 8\n  %x = add i64 %tid0, %o\n"
               "  %p0 = getelementptr double, ptr %a, i64 %x")
    assert len(_groups(_ir(first=uniform, second="%p1 = getelementptr double, ptr %p0, i64 1"))) == 1


def test_stores_to_other_arrays_in_between_need_noalias():
    text = _ir(between="store double %v, ptr %b, align 8")
    assert len(_groups(text, noalias=True)) == 1
    assert _groups(text, noalias=False) == []


def test_a_read_modify_write_of_another_array_in_between_refuses_the_group():
    rmw = "%l = load double, ptr %b, align 8\n  %s = fadd double %l, %v\n  store double %s, ptr %b, align 8"
    assert _groups(_ir(between=rmw)) == []
    assert len(_groups(_ir(between="%l = load double, ptr %b, align 8"))) == 1     # %b only read


def test_other_float_adds_in_between_commute():
    text = _ir(between="%y = atomicrmw fadd ptr %a, double %v monotonic, align 8")
    assert len(_groups(text)) == 1


def test_the_pivot_with_most_sites_within_a_warp_is_chosen():
    k = L.odd_offsets                # sites at i-2, i+5, i, i+40, i (in that order)
    module = ir.import_module(k.module_text())
    (group,) = lc.find_groups(module.functions[k.body_name], 1, True)
    assert len(group.pivot) == 1 and sorted((d, len(s)) for d, s in group.others.items()) == [(2, 2), (7, 1)]


@pytest.mark.parametrize("make, expected", [
    (lambda: ado.vjp(L.stencil_5pt, ["u"], primal_outputs=False), [(1, 2)]),
    (lambda: ado.vjp(L.stencil_f32, ["u"], primal_outputs=False), [(1, 3, 9)]),
    (lambda: ado.vjp(L.divergent, ["u"], primal_outputs=False), [(1, 2)]),
    (lambda: ado.vjp(L.looped, ["u"], primal_outputs=False), [(1,)]),
])
def test_adjoint_groups(make, expected):
    k = make()
    module = ir.import_module(k.module_text())
    groups = lc.find_groups(module.functions[k.body_name], k.signature.grid_rank, True)
    assert [tuple(sorted(g.others)) for g in groups] == expected


def test_clang_cuda_stencil_adjoint_has_a_group():
    """clang's IR (benchmarks/cuda/rajaperf.cu's lcals_eos): its lean adjoint adds d_u[i] and
    d_u[i+1 .. i+6] (written ``gep i8, (gep double, d_u, i), 8*c``) atomically: one group of seven
    (d_u[i] is not thread i's own: the neighbours' d_u[i+c] are the same elements). The full adjoint
    updates d_y and d_z in between: no group."""
    from adoffload.errors import ToolNotFoundError
    root = Path(__file__).resolve().parents[2]
    try:
        module = ado.from_cuda((root / "benchmarks" / "cuda" / "rajaperf.cu").read_text())
    except ToolNotFoundError as exc:
        pytest.skip(f"no clang (pip install ziglang): {exc}")
    In, Out, f64, i64 = ado.In[ado.f64], ado.Out[ado.f64], ado.f64, ado.i64
    eos = module.kernel("lcals_eos", x=Out, y=In, z=In, u=In, q=f64, r=f64, t=f64, n=i64)
    k = ado.vjp(eos, ["u", "y", "z"], primal_outputs=False).specialize((256,))
    body = ir.import_module(k.module_text()).functions[k.body_name]
    (group,) = lc.find_groups(body, k.signature.grid_rank, True, skip_args=len(k.shared))
    assert sorted(group.others) == [1, 2, 3, 4, 5, 6]
    full = ado.vjp(eos, ["u", "y", "z"]).specialize((256,))
    body = ir.import_module(full.module_text()).functions[full.body_name]
    assert lc.find_groups(body, full.signature.grid_rank, True, skip_args=len(full.shared)) == []


def test_rajaperf_stencil_adjoints_have_one_group():
    """lcals_eos's default adjoint reads d_y and d_z between its sites: left alone (module docstring)."""
    from benchmarks.kernels import rajaperf as rk
    for kernel, wrt, distances in ((rk.lcals_eos, ["u", "y", "z"], (1, 2, 3, 4, 5, 6)),
                                   (rk.lcals_hydro_1d, ["y", "z"], (1,)),
                                   (rk.lcals_first_diff, ["y"], (1,))):
        for lean in (True, False):
            k = ado.vjp(kernel, wrt, primal_outputs=not lean)
            module = ir.import_module(k.module_text())
            groups = lc.find_groups(module.functions[k.body_name], 1, True)
            if kernel is rk.lcals_eos and not lean:
                assert groups == []
            else:
                (group,) = groups
                assert tuple(sorted(group.others)) == distances


# ---- the rewritten code on 32 CPU threads, one per lane -------------------------------------------

class _Warp:
    """One emulated warp: ``activemask`` is the set of lanes started; ``shfl.sync.up`` and
    ``vote.sync.ballot`` exchange through slots between two barriers; atomics are counted."""
    current: "_Warp | None" = None

    def __init__(self, lanes):
        self.mask = sum(1 << lane for lane in lanes)
        self.barrier = threading.Barrier(len(lanes))
        self.slots = [0] * 32
        self.local = threading.local()
        self.lock = threading.Lock()
        self.atomics = 0

    def exchange(self, mask, value, pick):
        assert mask == self.mask, "shuffle with another mask than activemask's"
        lane = self.local.lane
        self.slots[lane] = value
        self.barrier.wait()
        result = pick(lane)
        self.barrier.wait()
        return result

    def shfl_up(self, mask, value, delta, clamp):
        def pick(lane):
            src = lane - delta
            if src < 0:
                return value
            return self.slots[src] if self.mask >> src & 1 else 0x5A5A5A5A     # undefined: garbage
        return self.exchange(mask, value, pick)

    def ballot(self, mask, predicate):
        bit = (predicate & 1) << self.local.lane
        return self.exchange(mask, bit, lambda lane: sum(self.slots[k] for k in range(32) if self.mask >> k & 1))

    def fadd(self, address, value, ctype=ctypes.c_double):
        with self.lock:
            cell = ctype.from_address(address)
            cell.value += value
            self.atomics += 1


_U32 = ctypes.c_uint32
_CALLBACKS = {
    "adoffload.test.activemask": ctypes.CFUNCTYPE(_U32)(lambda: _Warp.current.mask),
    "adoffload.test.laneid": ctypes.CFUNCTYPE(_U32)(lambda: _Warp.current.local.lane),
    "adoffload.test.shfl_up": ctypes.CFUNCTYPE(_U32, _U32, _U32, _U32, _U32)(
        lambda m, v, d, c: _Warp.current.shfl_up(m, v, d, c)),
    "adoffload.test.ballot": ctypes.CFUNCTYPE(_U32, _U32, _U32)(lambda m, p: _Warp.current.ballot(m, p)),
    "adoffload.test.fadd": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_double)(
        lambda a, v: _Warp.current.fadd(a, v)),
    "adoffload.test.fadd32": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_float)(
        lambda a, v: _Warp.current.fadd(a, v, ctypes.c_float)),
}
_RENAMES = {"llvm.nvvm.activemask": "adoffload.test.activemask",
            "llvm.nvvm.read.ptx.sreg.laneid": "adoffload.test.laneid",
            "llvm.nvvm.shfl.sync.up.i32": "adoffload.test.shfl_up",
            "llvm.nvvm.vote.ballot.sync": "adoffload.test.ballot"}
_ATOMIC = re.compile(r'%"?[\w.]+"? = atomicrmw fadd ptr (%"?[\w.]+"?), (float|double) (%"?[\w.]+"?|\S+) monotonic[^\n]*')


def _emulated(text: str, body: str, combine: bool) -> HostProgram:
    for name, address in ((n, ctypes.cast(f, ctypes.c_void_p).value) for n, f in _CALLBACKS.items()):
        llvm.add_symbol(name, address)
    if combine:
        text, count = lc.combine_lane_atomics(text, body, 1, True)
        assert count == 1
    for old, new in _RENAMES.items():
        text = text.replace(f'@"{old}"', f'@"{new}"')
    text = _ATOMIC.sub(lambda m: f'call void @"adoffload.test.fadd{"32" if m[2] == "float" else ""}"'
                       f'(ptr {m[1]}, {m[2]} {m[3]})', text)
    text += '\ndeclare void @"adoffload.test.fadd"(ptr, double)\ndeclare void @"adoffload.test.fadd32"(ptr, float)\n'
    return HostProgram(text, opt_level=1, codegen_level=0)


def _run_warp(program, body, tids, args):
    """Run ``body`` for lane -> tid ``tids`` (lanes absent are not started); return the atomic count."""
    fn = program.function(body, None, ctypes.c_int64, *[a[0] for a in args], ctypes.c_void_p)
    status = np.zeros(4, np.int64)
    warp = _Warp(sorted(tids))
    _Warp.current = warp

    def lane(k):
        warp.local.lane = k
        fn(tids[k], *[a[1] for a in args], status.ctypes.data)
    threads = [threading.Thread(target=lane, args=(k,)) for k in tids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a lane is stuck at a barrier"
    assert status[0] == 0
    return warp.atomics


def _arrays(h, v):
    return [(ctypes.c_void_p, h.ctypes.data), (ctypes.c_int64, h.size), (ctypes.c_void_p, v.ctypes.data),
            (ctypes.c_int64, v.size)]


_LAYOUTS = {
    "whole warp": {k: 100 + k for k in range(32)},
    "reversed": {k: 100 + 31 - k for k in range(32)},
    "two iterations": {k: 100 + k + 32 * (k % 2) for k in range(32)},
    "partial": {k: 100 + k for k in range(32) if k not in (3, 4, 17, 30)},
    "shuffled": dict(zip(range(32), random.Random(5).sample(range(100, 140), 32))),
}


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
def test_emulated_warp_adds_exactly_once(layout):
    tids = _LAYOUTS[layout]
    rng = np.random.default_rng(8)
    v = rng.standard_normal(200)
    k = L.odd_offsets
    counts = []
    results = []
    for combine in (False, True):
        program = _emulated(k.module_text(), k.body_name, combine)
        h = np.zeros(250)
        counts.append(_run_warp(program, k.body_name, tids, _arrays(h, v)))
        results.append(h)
    np.testing.assert_allclose(results[1], results[0], rtol=1e-14, atol=1e-14)
    assert counts[0] == 5 * len(tids)
    if layout == "whole warp":
        # the pivot (i-2) and i+40 for every lane; i (two adds) from the 2 top lanes, i+5 from the 7 top
        assert counts[1] == 32 + 32 + 2 * 2 + 7
    elif layout == "partial":
        assert counts[0] > counts[1] > 2 * len(tids)
    elif layout in ("reversed", "two iterations"):
        assert counts[1] == counts[0]       # no lane's neighbour holds the next element: nothing moves


def _random_kernels(tmp_path, seed: int, count: int):
    """Kernels of our language with random offset sets (negative, duplicated, past a warp)."""
    import importlib.util
    rng = np.random.default_rng(seed)
    lines = ["import adoffload as ado", ""]
    for s in range(count):
        offsets = rng.integers(-8, 40, size=rng.integers(2, 9)).tolist()
        lines += ["@ado.kernel(bounds_check=False)", f"def random_{s}(h: ado.InOut[ado.f64], v: ado.In[ado.f64]):",
                  "    i = ado.tid() + 8"]
        lines += [f"    ado.atomic_add(h, i + ({c}), {k + 1}.0 * v[i])" for k, c in enumerate(offsets)]
        lines.append("")
    path = tmp_path / f"random_lane_kernels_{seed}.py"
    path.write_text("\n".join(lines))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [getattr(module, f"random_{s}") for s in range(count)]


@pytest.mark.parametrize("layout", ["whole warp", "partial", "shuffled"])
def test_emulated_warp_random_offsets(tmp_path, layout):
    tids = _LAYOUTS[layout]
    v = np.random.default_rng(10).standard_normal(200)
    combined = 0
    for k in _random_kernels(tmp_path, 11, 4):
        module = ir.import_module(k.module_text())
        if not lc.find_groups(module.functions[k.body_name], 1, True):
            continue
        combined += 1
        results = []
        for combine in (False, True):
            h = np.zeros(250)
            _run_warp(_emulated(k.module_text(), k.body_name, combine), k.body_name, tids, _arrays(h, v))
            results.append(h)
        np.testing.assert_allclose(results[1], results[0], rtol=1e-13, atol=1e-13)
    assert combined >= 2


def _flat_args(kernel, values: dict) -> list:
    """(ctypes type, value) per flattened body parameter but the thread ids and the status."""
    args = []
    for f in kernel.signature.flat_params():
        value = values[f.name.split(".")[0]]
        if f.role == "array":
            args.append((ctypes.c_void_p, value.ctypes.data))
        elif f.role == "shape":
            args.append((ctypes.c_int64, value.shape[f.dim]))
        else:
            args.append((ctypes.c_double, value))
    return args


def test_emulated_warp_eos_adjoint_adds_53_times_instead_of_224():
    """lcals_eos's lean adjoint: 7 adds per lane (d_u[i] .. d_u[i+6]); combined, 32 pivot adds and
    the d top lanes' site-d adds (1 + 2 + ... + 6): 53 per whole warp."""
    from benchmarks.kernels import rajaperf as rk
    k = ado.vjp(rk.lcals_eos, ["u", "y", "z"], primal_outputs=False)
    rng = np.random.default_rng(12)
    n = 200
    base = rk.CASES[[c.name for c in rk.CASES].index("lcals_eos")].make(n, rng)
    seed = rng.standard_normal(n)
    counts, results = [], []
    for combine in (False, True):
        values = dict(base, d_x=seed, d_y=np.zeros(n), d_z=np.zeros(n), d_u=np.zeros(n + 7))
        program = _emulated(k.module_text(), k.body_name, combine)
        counts.append(_run_warp(program, k.body_name, _LAYOUTS["whole warp"], _flat_args(k, values)))
        results.append(values)
    assert counts == [224, 53]
    for name in ("d_u", "d_y", "d_z"):
        np.testing.assert_allclose(results[1][name], results[0][name], rtol=1e-14, atol=1e-14)
    assert np.count_nonzero(results[1]["d_u"]) == 32 + 6


def test_emulated_warp_f32_adjoint_with_a_duplicate_and_a_far_site():
    """stencil_f32's adjoint: d_u[i], d_u[i+1], d_u[i+3] (u[i+3]**2: one add) and d_u[i+9], 32-bit shuffles."""
    k = ado.vjp(L.stencil_f32, ["u"], primal_outputs=False)
    rng = np.random.default_rng(13)
    n = 200
    u, seed = rng.standard_normal(n + 9).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    counts, results = [], []
    for combine in (False, True):
        values = dict(out=np.zeros(n, np.float32), u=u, d_out=seed, d_u=np.zeros(n + 9, np.float32))
        program = _emulated(k.module_text(), k.body_name, combine)
        counts.append(_run_warp(program, k.body_name, _LAYOUTS["whole warp"], _flat_args(k, values)))
        results.append(values["d_u"])
    assert counts == [4 * 32, 32 + 1 + 3 + 9]
    np.testing.assert_allclose(results[1], results[0], rtol=2e-6, atol=2e-6)


def test_emulated_warp_grid_stride_kernel():
    k = L.with_total                  # its body (the entry would loop over the grid around it)
    rng = np.random.default_rng(9)
    v = rng.standard_normal(200)
    tids = _LAYOUTS["whole warp"]
    results = []
    for combine in (False, True):
        program = _emulated(k.module_text(), k.body_name, combine)
        h, total = np.zeros(200), np.zeros(1)
        args = [(ctypes.c_void_p, h.ctypes.data), (ctypes.c_int64, h.size), (ctypes.c_void_p, total.ctypes.data),
                (ctypes.c_int64, 1), (ctypes.c_void_p, v.ctypes.data), (ctypes.c_int64, v.size)]
        _run_warp(program, k.body_name, tids, args)
        results.append((h, total))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-14)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-13)


# ---- PTX -------------------------------------------------------------------------------------------

def _have(finder) -> bool:
    try:
        finder()
        return True
    except Exception:
        return False


needs_ptxas = pytest.mark.skipif(not (_have(tools.find_ptxas) and _have(tools.find_libdevice)),
                                 reason="ptxas or libdevice not installed (pip install nvidia-cuda-nvcc nvidia-nvvm)")


def _eos(**kw):
    from benchmarks.kernels import rajaperf as rk
    return ado.vjp(rk.lcals_eos, ["u", "y", "z"], primal_outputs=False, **kw)


@needs_ptxas
def test_eos_adjoint_ptx_is_combined_and_assembles():
    from adoffload.codegen.gpu import nvptx
    ptx = _eos().compiled("nvptx", noalias=True).artifact
    assert "activemask.b32" in ptx and "vote.sync.ballot.b32" in ptx and ptx.count("shfl.sync.up.b32") >= 14
    # one add of the whole group is unconditional; each of the 6 others is behind its skip branch
    adds = [k for k, line in enumerate(ptx.splitlines()) if "atom.global.add.f64" in line]
    lines = ptx.splitlines()
    guarded = sum(1 for k in adds if re.match(r"\s*@%p\d+ bra", lines[k - 1]))
    assert guarded >= 6
    nvptx.ptxas_check(ptx, "sm_90")
    cuobjdump = tools.find_ptxas().parent / "cuobjdump"
    if cuobjdump.exists():      # the SASS: 7 REDG, every one behind a branch or exit of its own: the 6
        # lane-combining skips, and the group's own add behind its -0.0 test (codegen/gpu/zero_adds.py)
        import subprocess
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "k.ptx").write_text(ptx)
            subprocess.run([str(tools.find_ptxas()), "-arch=sm_90", f"{tmp}/k.ptx", "-o", f"{tmp}/k.cubin"], check=True)
            sass = subprocess.run([str(cuobjdump), "-sass", f"{tmp}/k.cubin"], capture_output=True, text=True,
                                  check=True).stdout
        code = [line for line in sass.splitlines() if "/*" in line and ";" in line]
        reds = [k for k, line in enumerate(code) if "REDG.E.ADD.F64" in line]
        assert len(reds) == 7
        assert sum(1 for k in reds if re.search(r"@!?P\d+ (BRA|EXIT)", code[k - 1])) == 7


def test_off_for_deterministic_kernels_sm_70_k_elements_and_by_option(monkeypatch, tmp_path):
    from adoffload import codegen
    from adoffload.codegen.gpu import nvptx
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))     # no cached artifact skips the pass
    seen = []
    original = lc.combine_lane_atomics
    monkeypatch.setattr(lc, "combine_lane_atomics", lambda *a, **k: seen.append(a[1]) or original(*a, **k))
    monkeypatch.setattr(nvptx, "compile_ptx", lambda module, arch: "")        # the IR pipeline is enough
    k = _eos()
    text, body = k.module_text(), k.body_name
    flat = [f.llvm_type for f in k.signature.flat_params()]
    for opts, arch, expect in ((dict(lane_combining=False), "sm_90", 0), ({}, "sm_70", 0), ({}, "sm_90", 1),
                               (dict(elements_per_thread=2), "sm_90", 0)):
        seen.clear()
        codegen.compile_for_target(text, body, flat, 1, "nvptx", arch, cache=False, noalias=True, **opts)
        assert len(seen) == expect, (opts, arch)
    seen.clear()
    ado.vjp(L.odd_offsets, ["v"], deterministic=True).compiled("nvptx", noalias=True)
    assert seen == []
    ado.vjp(L.odd_offsets, ["v"]).compiled("nvptx", noalias=True)
    assert len(seen) == 1
    assert codegen.normalize_options({"lane_combining": False}, "nvptx", 1) == {"lane_combining": False}
    assert codegen.normalize_options({"lane_combining": True}, "nvptx", 1) == {}
    assert codegen.normalize_options({"lane_combining": False}, "host", 1) == {}
    monkeypatch.setenv("ADOFFLOAD_LANE_COMBINING", "0")
    assert codegen.normalize_options({}, "nvptx", 1) == {"lane_combining": False}
