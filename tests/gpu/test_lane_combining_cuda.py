"""Lane-combined atomics (codegen/gpu/lane_combining.py) on the GPU: stencil adjoints and primal atomics
give the host's results, for sizes that are not whole warps or blocks, with odd offsets, under
divergent branches, in loops of different trip counts per lane, and in a grid-stride entry; and
the PTX really has the combined form (so a pass that stopped firing fails here)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import adoffload as ado

_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_ROOT / "tests" / "codegen"))
import lane_kernels as L  # noqa: E402
from benchmarks.kernels.rajaperf import CASES  # noqa: E402

pytestmark = pytest.mark.gpu
SIZES = (33, 1000, 4099, 70001)     # none a multiple of 32 or of a block


def _run(kernel, values, device, grid):
    values = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}
    kernel(**values, grid=grid, device=device)
    return values


def _combined(kernel) -> bool:
    ptx = kernel.compiled("nvptx", noalias=True).artifact
    return "activemask.b32" in ptx and "vote.sync.ballot" in ptx


def _compare(kernel, values, grid, rtol):
    gpu, cpu = _run(kernel, values, "cuda", grid), _run(kernel, values, "cpu", grid)
    for p in kernel.signature.params:
        if p.is_array:
            np.testing.assert_allclose(gpu[p.name], cpu[p.name], rtol=rtol, atol=rtol,
                                       err_msg=f"{kernel.name}: {p.name} at grid {grid}")


def _adjoint_values(kernel, base, rng):
    values = dict(base)
    for p in kernel.signature.params[len(base):]:
        like = base[p.name[2:]]
        values[p.name] = rng.standard_normal(np.shape(like)).astype(np.asarray(like).dtype) \
            if np.ndim(like) else (np.zeros(1) if p.is_array else float(rng.standard_normal()))
    return values


@pytest.mark.parametrize("lean", [True, False])
@pytest.mark.parametrize("name", ["lcals_eos", "lcals_hydro_1d", "lcals_first_diff"])
@pytest.mark.parametrize("n", SIZES)
def test_rajaperf_stencil_adjoints_match_the_host(cuda, name, n, lean):
    case = next(c for c in CASES if c.name == name)
    k = ado.vjp(case.kernel, case.wrt, primal_outputs=not lean)
    # lcals_eos's default adjoint reads d_y, d_z between its sites: left alone (lane_combining.py)
    assert _combined(k) == (lean or name != "lcals_eos")
    rng = np.random.default_rng(n)
    _compare(k, _adjoint_values(k, case.make(n, rng), rng), n, 1e-11)


@pytest.mark.parametrize("shape", [(7, 45), (66, 130), (300, 301)])
def test_5_point_stencil_adjoint_matches_the_host(cuda, shape):
    k = ado.vjp(L.stencil_5pt, ["u"], primal_outputs=False)
    assert _combined(k)
    rng = np.random.default_rng(3)
    n, m = shape
    base = dict(out=np.zeros((n, m)), u=rng.standard_normal((n, m)), a=0.5, b=-0.25)
    _compare(k, _adjoint_values(k, base, rng), (n - 2, m - 2), 1e-11)


@pytest.mark.parametrize("n", SIZES)
def test_f32_stencil_with_a_duplicate_site_matches_the_host(cuda, n):
    k = ado.vjp(L.stencil_f32, ["u"], primal_outputs=False)
    assert _combined(k)
    rng = np.random.default_rng(4)
    base = dict(out=np.zeros(n, np.float32), u=rng.standard_normal(n + 9).astype(np.float32))
    _compare(k, _adjoint_values(k, base, rng), n, 2e-5)


@pytest.mark.parametrize("name", ["divergent", "looped"])
@pytest.mark.parametrize("n", SIZES)
def test_divergent_and_looped_groups_match_the_host(cuda, name, n):
    k = ado.vjp(getattr(L, name), ["u"], primal_outputs=False)
    assert _combined(k)
    rng = np.random.default_rng(5)
    base = dict(out=np.zeros(n), u=rng.standard_normal(n + 5))
    _compare(k, _adjoint_values(k, base, rng), n, 1e-11)


@pytest.mark.parametrize("n", SIZES)
def test_groups_on_both_sides_of_a_branch_match_the_host(cuda, n):
    assert _combined(L.two_arms)
    rng = np.random.default_rng(12)
    c = rng.standard_normal(n)
    c[: n // 2] = np.where(np.arange(n // 2) % 3 == 0, 1.0, -1.0)     # neighbours on different sides
    _compare(L.two_arms, dict(h=np.zeros(n + 2), v=rng.standard_normal(n), c=c), n, 1e-11)


@pytest.mark.parametrize("n", SIZES)
def test_primal_atomics_with_odd_offsets_and_a_grid_stride_entry(cuda, n):
    rng = np.random.default_rng(6)
    assert _combined(L.odd_offsets) and _combined(L.with_total)
    _compare(L.odd_offsets, dict(h=np.zeros(n + 44), v=rng.standard_normal(n + 2)), n, 1e-11)
    compiled = L.with_total.compiled("nvptx", noalias=True)
    assert compiled.grid_stride           # lanes of one warp run different ids: the address check decides
    _compare(L.with_total, dict(h=np.zeros(n + 1), total=np.zeros(1), v=rng.standard_normal(n)), n, 1e-10)


def test_random_offset_sets_match_the_host(cuda, tmp_path):
    """Kernels generated with random offsets (negative, duplicated, beyond a warp)."""
    import importlib.util
    rng = np.random.default_rng(7)
    lines = ["import adoffload as ado", ""]
    sets = [sorted(rng.integers(-8, 40, size=rng.integers(2, 9)).tolist()) for _ in range(6)]
    for s, offsets in enumerate(sets):
        lines += ["@ado.kernel(bounds_check=False)",
                  f"def random_{s}(h: ado.InOut[ado.f64], v: ado.In[ado.f64]):",
                  "    i = ado.tid() + 8"]
        lines += [f"    ado.atomic_add(h, i + ({c}), {k + 1}.0 * v[i])" for k, c in enumerate(offsets)]
        lines.append("")
    path = tmp_path / "random_lane_kernels.py"
    path.write_text("\n".join(lines))
    spec = importlib.util.spec_from_file_location("random_lane_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for s in range(len(sets)):
        k = getattr(module, f"random_{s}")
        for n in (33, 4099):
            _compare(k, dict(h=np.zeros(n + 48), v=rng.standard_normal(n + 8)), n, 1e-11)


@pytest.mark.parametrize("n", [64, 4096, 70016])
def test_block_kernel_adjoint_matches_the_host(cuda, n):
    k = ado.vjp(L.block_stencil, ["u"], primal_outputs=False)
    assert _combined(k)
    rng = np.random.default_rng(10)
    base = dict(out=np.zeros(n), u=rng.standard_normal(n + 2))
    _compare(k, _adjoint_values(k, base, rng), n, 1e-11)


@pytest.mark.parametrize("lean", [False, True])
def test_cuda_source_stencil_adjoint_matches_the_host(cuda, lean):
    """clang's IR of benchmarks/cuda/rajaperf.cu's lcals_eos (from the compile cache where the machine
    has no clang): its adjoint's d_u[i+1 .. i+6] group combined, launched CUDA-style, three times
    (a race shows up as lost contributions at warp edges, different ones each run: clang writes
    u[i + 1] through a byte offset, and d_u[i] was once taken for thread i's own: plain adds)."""
    from adoffload.errors import ToolNotFoundError
    try:
        module = ado.from_cuda((_ROOT / "benchmarks" / "cuda" / "rajaperf.cu").read_text())
    except ToolNotFoundError as exc:
        pytest.skip(f"no clang and no cached IR of rajaperf.cu: {exc}")
    In, Out, f64, i64 = ado.In[ado.f64], ado.Out[ado.f64], ado.f64, ado.i64
    eos = module.kernel("lcals_eos", x=Out, y=In, z=In, u=In, q=f64, r=f64, t=f64, n=i64)
    d = ado.vjp(eos, ["u", "y", "z"], primal_outputs=not lean)
    assert _combined(d.specialize((256,))) == lean     # the full adjoint updates d_y, d_z between its sites
    n = 70016
    rng = np.random.default_rng(11)
    values = dict(x=np.zeros(n), y=rng.standard_normal(n), z=rng.standard_normal(n), u=rng.standard_normal(n + 7),
                  q=0.5, r=0.3, t=0.2, n=n, d_x=rng.standard_normal(n), d_y=np.zeros(n), d_z=np.zeros(n),
                  d_u=np.zeros(n + 7))
    blocks = (n + 255) // 256
    gpu = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}
    cpu = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}
    d(**cpu, blocks=blocks, threads=256, device="cpu")
    for _ in range(3):
        gpu = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}
        d(**gpu, blocks=blocks, threads=256, device="cuda")
        for name in ("d_u", "d_y", "d_z"):
            np.testing.assert_allclose(gpu[name], cpu[name], rtol=1e-11, atol=1e-11, err_msg=name)
