"""Deferred uniform-address atomics (codegen/gpu/reductions.py): analysis, host results, PTX shape."""
import re

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen import abi, compile_for_target
from adoffload.codegen.gpu import nvptx, tools
from adoffload.codegen.host.program import HostProgram
from adoffload.codegen.gpu.reductions import defer_uniform_atomics, identity
from adoffload.errors import CompilationError, ToolNotFoundError


def _have(finder):
    try:
        finder()
        return True
    except ToolNotFoundError:
        return False


needs_ptxas = pytest.mark.skipif(not _have(tools.find_ptxas), reason="ptxas not installed")


@ado.kernel
def dot(a: ado.In[ado.f64], b: ado.In[ado.f64], out: ado.InOut[ado.f64]):
    i = ado.tid()
    ado.atomic_add(out, 0, a[i] * b[i])


@ado.kernel
def stats(v: ado.In[ado.i32], s: ado.InOut[ado.i64], lo: ado.InOut[ado.i32], hi: ado.InOut[ado.i32],
          f: ado.InOut[ado.f32]):
    i = ado.tid()
    x = v[i]
    ado.atomic_add(s, 0, ado.i64(x))
    ado.atomic_min(lo, 0, x)
    ado.atomic_max(hi, 0, x)
    ado.atomic_add(f, 1, ado.f32(x))        # a constant, non-zero element: still uniform


@ado.kernel
def histogram(v: ado.In[ado.i32], h: ado.InOut[ado.i64]):
    i = ado.tid()
    ado.atomic_add(h, v[i] % 4, ado.i64(1))  # data-dependent address: not uniform


@ado.kernel
def sum_and_read(v: ado.In[ado.f64], s: ado.InOut[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    ado.atomic_add(s, 0, v[i])
    out[i] = s[1]                             # the accumulated array is also read: keep atomics


@ado.kernel
def conditional_sum(v: ado.In[ado.f64], s: ado.InOut[ado.f64]):
    i = ado.tid()
    if v[i] > 0.5:
        ado.atomic_add(s, 0, v[i])


@ado.kernel
def sum2d(m: ado.In[ado.f64, 2], s: ado.InOut[ado.f64]):
    i, j = ado.tid()
    ado.atomic_add(s, 0, m[i, j])


def _function(text, name):
    """The text of ``define ... @name(...) { ... }`` in an LLVM module."""
    m = re.search(rf'^define[^\n]*@"?{re.escape(name)}"?\(.*?^}}', text, re.M | re.S)
    assert m, f"@{name} not defined"
    return m.group(0)


def _sites(k):
    return defer_uniform_atomics(k.module_text(), k.body_name, k.signature.grid_rank).sites


def test_sites_found_only_for_uniform_addresses_with_no_other_use():
    assert [(s.op, s.type_name) for s in _sites(dot)] == [("fadd", "double")]
    assert [(s.op, s.type_name) for s in _sites(stats)] == [("add", "i64"), ("min", "i32"), ("max", "i32"),
                                                            ("fadd", "float")]
    assert _sites(histogram) == []
    assert _sites(sum_and_read) == []


def test_deferred_body_has_no_atomic_add_left():
    deferred = defer_uniform_atomics(stats.module_text(), stats.body_name, 1)
    body = _function(deferred.text, stats.body_name)
    assert not re.search(r"atomicrmw (add|min|max|fadd)", body)
    assert body.split("\n", 1)[0].count('ptr %"uacc') == 4     # one accumulator parameter per site


def test_identities():
    assert identity("fadd", "double") == -0.0 and np.copysign(1, identity("fadd", "float")) < 0
    assert identity("min", "i32") == 2**31 - 1 and identity("max", "i32") == -2**31
    assert identity("umin", "i64") == 2**64 - 1 and identity("add", "i64") == 0


def test_unknown_mode_is_refused():
    with pytest.raises(CompilationError, match="reductions="):
        abi.add_gpu_entry(dot.module_text(), dot.body_name, [f.llvm_type for f in dot.signature.flat_params()],
                          1, "nvptx", reductions="grid")


# ---- host: results, and one atomic per chunk ------------------------------------------------

def test_host_results_match_numpy():
    rng = np.random.default_rng(3)
    n = 5003
    a, b = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    out = np.array([0.25])
    dot(a, b, out, grid=n)
    assert out[0] == pytest.approx(0.25 + a @ b, rel=1e-12)
    v = rng.integers(-10**6, 10**6, n).astype(np.int32)
    s, lo, hi = np.array([7], np.int64), np.array([2**31 - 1], np.int32), np.array([-2**31], np.int32)
    f = np.zeros(2, np.float32)
    stats(v, s, lo, hi, f, grid=n)
    assert (s[0], lo[0], hi[0]) == (7 + v.astype(np.int64).sum(), v.min(), v.max())
    assert f[0] == 0 and f[1] == pytest.approx(v.astype(np.float64).sum(), rel=1e-5)
    c = np.array([0.0])
    conditional_sum(a, c, grid=n)
    assert c[0] == pytest.approx(a[a > 0.5].sum(), rel=1e-12)
    m = rng.uniform(size=(37, 41))
    t = np.zeros(1)
    sum2d(m, t, grid=m.shape)
    assert t[0] == pytest.approx(m.sum(), rel=1e-12)


def test_host_entry_adds_once_per_chunk_and_chunks_compose():
    flat = [f.llvm_type for f in dot.signature.flat_params()]
    text = abi.add_host_entry(dot.module_text(), dot.body_name, flat, 1)
    program = HostProgram(text)
    ir_text = program.optimized_ir
    entry = _function(ir_text, abi.host_entry_name(dot.body_name))
    assert entry.count("atomicrmw fadd") == 1
    run = program.entry(abi.host_entry_name(dot.body_name))
    n = 1000
    a, b, out = np.arange(n, dtype=np.float64), np.full(n, 0.5), np.zeros(1)
    status = np.zeros(4, np.int64)
    slots = abi.pack_slots([a, n, b, n, out, 1], flat, [n], status)
    for start in range(0, n, 333):
        run(slots.ctypes.data, start, min(start + 333, n))
    assert out[0] == 0.5 * a.sum()


def test_off_keeps_the_per_thread_atomic():
    flat = [f.llvm_type for f in dot.signature.flat_params()]
    text = abi.add_host_entry(dot.module_text(), dot.body_name, flat, 1, reductions="off")
    assert "uacc" not in text


def test_vjp_of_a_scalar_parameter_uses_the_deferred_reduction_and_is_right():
    @ado.kernel
    def scale(x: ado.In[ado.f64], alpha: ado.f64, y: ado.Out[ado.f64]):
        i = ado.tid()
        y[i] = alpha * x[i] * x[i]

    back = ado.vjp(scale, ["alpha"])
    names = [p.name for p in back.signature.params]
    n = 777
    x = np.linspace(0, 1, n)
    values = {"x": x, "alpha": 2.0, "y": np.zeros(n), "d_y": np.ones(n), "d_alpha": np.zeros(1)}
    args = [values[p] for p in names]
    back(*args, grid=n)
    assert args[names.index("d_alpha")][0] == pytest.approx((x * x).sum(), rel=1e-12)
    assert _sites(back), "the adjoint's uniform add should be a deferred site"


# ---- PTX --------------------------------------------------------------------------------------

def _ptx(k, mode="block", arch="sm_90"):
    flat = [f.llvm_type for f in k.signature.flat_params()]
    return compile_for_target(k.module_text(), k.body_name, flat, k.signature.grid_rank, "nvptx", arch,
                              cache=False, reductions=mode)


@needs_ptxas
def test_block_mode_ptx_reduces_in_warps_and_shared_memory():
    ptx = _ptx(dot)
    assert ptx.count("shfl.sync.down.b32") == 20           # 2 trees x 5 steps x 2 halves of an f64
    assert "bar.sync" in ptx and ".shared" in ptx
    assert 1 <= ptx.count("atom.global.add.f64") <= 2      # block leader + non-whole-warp fallback (may merge)
    report = nvptx.ptxas_check(ptx)
    assert "0 bytes spill" in report and "256 bytes smem" in report


@needs_ptxas
def test_warp_mode_has_no_barrier_and_thread_mode_no_shuffle():
    warp = _ptx(dot, "warp")
    assert "shfl.sync.down" in warp and "bar.sync" not in warp
    thread = _ptx(dot, "thread")
    assert "shfl.sync" not in thread and thread.count("atom.global.add.f64") == 1
    off = _ptx(dot, "off")
    assert "shfl.sync" not in off
    for ptx in (warp, thread, off):
        nvptx.ptxas_check(ptx)


@needs_ptxas
def test_integer_sites_in_ptx():
    ptx = _ptx(stats)
    for op in ("atom.global.add.u64", "atom.global.min.s32", "atom.global.max.s32", "atom.global.add.f32"):
        assert op in ptx, op
    assert "bar.sync" in ptx
    nvptx.ptxas_check(ptx)
    assert "shfl.sync" not in _ptx(histogram)


def test_amdgpu_defers_to_one_atomic_per_thread_after_the_body():
    flat = [f.llvm_type for f in dot.signature.flat_params()]
    module = abi.add_gpu_entry(dot.module_text(), dot.body_name, flat, 1, "amdgpu")
    entry = _function(module, abi.kernel_entry_name(dot.body_name))
    assert entry.count("atomicrmw fadd") == 1 and "amdgpu_kernel" in entry
    assert "atomicrmw fadd" not in _function(module, dot.body_name)


def test_amdgpu_backend_combines_the_deferred_atomic_across_the_wavefront():
    from adoffload.codegen.gpu import amdgpu
    flat = [f.llvm_type for f in dot.signature.flat_params()]
    asm = amdgpu.compile_gcn_assembly(abi.add_gpu_entry(dot.module_text(), dot.body_name, flat, 1, "amdgpu"))
    assert "v_readlane_b32" in asm and "s_ff1_i32_b64" in asm      # the atomic optimizer's wave loop


@ado.kernel
def far_site(v: ado.In[ado.f64], s: ado.InOut[ado.f64], k: ado.i32):
    i = ado.tid()
    if v[i] > 100.0:
        ado.atomic_add(s, k, v[i])


def test_a_site_no_thread_reaches_touches_no_memory():
    # The deferred atomic's pointer is computed after the body; with an index far out of bounds and
    # no thread passing the condition, the kernel must not add anything there (it used to segfault).
    v, s = np.ones(1000), np.zeros(2)
    far_site(v, s, 1 << 28, grid=(1000,))
    np.testing.assert_array_equal(s, [0.0, 0.0])


def test_a_site_reached_out_of_bounds_is_a_bounds_error():
    v, s = np.ones(1000), np.zeros(2)
    v[7] = 200.0
    with pytest.raises(ado.BoundsError, match="out of bounds"):
        far_site(v, s, 1 << 28, grid=(1000,))
    far_site(v, s, 1, grid=(1000,))
    np.testing.assert_array_equal(s, [0.0, 200.0])


@ado.kernel
def pair_gather(x: ado.In[ado.f64], w: ado.In[ado.f64], e: ado.Out[ado.f64]):
    """Its reverse kernel in x and w adds into d_x[j] (j: the loop's phi) and d_w[0] (uniform)."""
    i = ado.tid()
    acc = 0.0
    for j in range(x.shape[0]):
        acc = acc + w[0] * ado.exp(-(x[j] - x[i]) * (x[j] - x[i]))
    e[i] = acc


def test_the_textual_prefilter_skips_only_modules_without_sites():
    """``_may_have_uniform_site`` (a text scan ahead of the module's import) answers False only where
    the analysis finds no site: loop-indexed adds (a phi) and thread-indexed ones; True wherever it finds one."""
    from adoffload.codegen.gpu.reductions import _analyze, _may_have_uniform_site
    loop_only, both = ado.vjp(pair_gather, ["x"]), ado.vjp(pair_gather, ["x", "w"])
    kernels = {"dot": dot, "stats": stats, "histogram": histogram, "sum_and_read": sum_and_read,
               "conditional_sum": conditional_sum, "sum2d": sum2d, "far_site": far_site, "both": both,
               "loop_only": loop_only, "second": ado.vjp(ado.vjp(pair_gather, ["x"], primal_outputs=False), ["w"])}
    answers = {}
    for name, k in kernels.items():
        text, rank = k.module_text(), k.signature.grid_rank
        found = bool(_analyze(text, k.body_name, rank)[2])
        answers[name] = _may_have_uniform_site(text, k.body_name, rank)
        assert answers[name] or not found, f"{name}: the prefilter would skip a site the analysis finds"
    assert answers["dot"] and answers["stats"] and answers["both"]        # out[0], s[0], d_w[0]: uniform
    assert "adoffload.uniform_fadd" in loop_only.module_text()      # its d_x[j] adds are there, but loop-indexed
    assert not answers["loop_only"] and not answers["histogram"]     # d_x[j]: a phi; h[v[i]]: a load
