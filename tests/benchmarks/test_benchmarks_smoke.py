"""Unit tests of the benchmarks' pieces that run on the CPU: the timer, the targets, the chemistry
suite's ratios and size limits, and the hand-written baselines' physics (no timing assertions)."""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from benchmarks import targets, timing
from benchmarks.peers import jaxmd_lj
from benchmarks.suites import chemistry

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_one_timer_reports_median_iqr_and_extremes():
    calls = []
    t = timing.time_calls(lambda: calls.append(1), lambda _: None, reps=5, batch=3, warmup=2)
    assert len(calls) == 2 + 5 * 3
    assert t.reps == 5 and t.min_ms <= t.q1_ms <= t.median_ms <= t.q3_ms <= t.max_ms
    assert set(t.columns("x")) == {"x_ms", "x_iqr_ms", "x_min_ms", "x_max_ms"}


def test_report_keeps_sizes_apart_and_names_failed_kernels():
    rows = [{"kernel": "stream_dot", "n": 10, "ours_ms": 1.0, "cuda_ms": 2.0, "vjp_ratio": 2.0, "vjp_ms": 2.0},
            {"kernel": "basic_if_quad", "n": 10, "error": "OutOfMemoryError"},
            {"kernel": "stream_dot", "n": 20, "ours_ms": 4.0, "cuda_ms": 1.0, "vjp_ratio": 3.0, "vjp_ms": 12.0}]
    suites = {"rajaperf": {"rows": [{k: v for k, v in r.items() if not k.startswith("vjp")} for r in rows]},
              "derivatives": {"rows": [{k: v for k, v in r.items() if k in ("kernel", "n", "vjp_ratio", "vjp_ms",
                                                                             "error")} for r in rows]}}
    lines = {r["measure"]: r["measured"] for r in targets.targets(suites)}
    primal = {m: v for m, v in lines.items() if "primal / hand-written CUDA" in m}
    assert sorted(primal.values()) == [0.5, 4.0]                      # one geomean per size, never mixed
    assert any("missing: basic_if_quad" in m for m in primal)
    assert lines["n=10: stream_dot: tuned CUDA time / ours"] == 2.0


def test_chemistry_ratio_to_cuda_takes_its_fastest_form():
    """The CUDA ceiling is the fastest of the hand-written forms (one thread or several lanes per
    atom) at each size, and a failed (time-less) form is not counted."""
    cuda = chemistry.EF + " (per-atom e, no total)"
    rows = [{"atoms": 10, "side": "adoffload", "measure": chemistry.EF, "median_ms": 3.0},
            {"atoms": 10, "side": "cuda", "measure": cuda, "median_ms": 2.0},
            {"atoms": 10, "side": "cuda 4 lanes/atom", "measure": cuda, "median_ms": 1.5},
            {"atoms": 10, "side": "cuda 8 lanes/atom", "measure": cuda, "error": "RuntimeError: x"},
            {"atoms": 20, "side": "adoffload", "measure": chemistry.EF, "median_ms": 3.0},
            {"atoms": 20, "side": "cuda 2 lanes/atom", "measure": cuda, "median_ms": 3.0}]
    values = {(r["atoms"], r["ratio"]): r["value"] for r in chemistry.ratios(rows)}
    name = chemistry.RATIOS[0][0]
    assert values[(10, name)] == pytest.approx(2.0) and values[(20, name)] == pytest.approx(1.0)


def test_chemistry_benchmark_skips_a_side_above_its_size_limit():
    """--max-atoms: a side above its limit is one row saying so; the others still run."""
    from benchmarks.results import BenchmarkError
    rows = chemistry.measure_all([], device="cpu", sizes=[256], reps=1, sides=["jax", "adoffload"],
                                 measures=[chemistry.EF], max_atoms={"adoffload": 255})
    assert [(r["side"], r["measure"]) for r in rows] == [("jax", chemistry.EF), ("adoffload", "all")]
    assert rows[0]["median_ms"] > 0
    assert rows[1]["error"] == "skipped: 256 atoms is above this side's limit of 255 (--max-atoms)"
    with pytest.raises(BenchmarkError, match="jax-md Dens=5"):
        chemistry.max_atoms_limits(["jax-md Dens=5"])


def test_jaxmd_peer_is_the_same_physics():
    ok, why = jaxmd_lj.available()
    if not ok:
        pytest.skip(why)
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    from adoffload.chemistry import ForceField, LennardJones, as_box
    from adoffload.chemistry.dynamics import fcc_lattice
    pos, edge = fcc_lattice(4, 0.8)
    pos = jnp.asarray(pos + 0.05 * np.random.default_rng(0).normal(size=pos.shape))
    ff = ForceField((LennardJones(cutoff=2.5),), as_box(edge), backend="jax")
    energy, forces = ff.energy_and_forces(pos, ff.neighbor_list(len(pos), skin=0.3).build(pos).neighbors)
    for fmt in ("Dense", "OrderedSparse"):
        peer = jaxmd_lj.JaxMdLJ(pos, float(edge), 2.5, 0.3, fmt)
        e, f = peer.energy_and_forces(pos, peer.neighbors)
        assert float(e) == pytest.approx(float(energy), rel=1e-12)
        np.testing.assert_allclose(f, forces, atol=1e-10)
        rebuilt = peer.rebuild(pos, peer.neighbors)
        assert not bool(rebuilt.did_buffer_overflow)
        gradient = peer.force_loss_gradient({"sigma": 1.0, "epsilon": 1.0}, pos, peer.neighbors)
        assert np.isfinite(float(gradient["sigma"])) and np.isfinite(float(gradient["epsilon"]))


_SHIM = r"""
#include <cmath>
#include <cstdint>
using std::floor;
struct Index3 { int64_t x, y, z; };
static Index3 blockIdx, threadIdx, blockDim;
#define __global__
#define __device__
template <class T> T __shfl_down_sync(unsigned, T v, int) { return v; }   // compiled, never run (one lane)
#include "LJ_CU"
extern "C" void run_all(const double* pos, const double* box, const int64_t* nb, double sigma, double epsilon,
                        double cutoff, double* e, double* f, int64_t n, int64_t capacity) {
  blockDim.x = 1;
  for (int64_t i = 0; i < n; ++i) { blockIdx.x = i; lj_energy_forces(pos, box, nb, sigma, epsilon, cutoff, e, f, n, capacity); }
}
"""


def test_hand_written_cuda_lj_computes_the_same_physics(tmp_path):
    """cuda/lj.cu compiled for the host through a tiny shim (one 'thread' at a time)."""
    if shutil.which("g++") is None:
        pytest.skip("no g++ to compile the CUDA kernel's body for the host")
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    from adoffload.chemistry import ForceField, LennardJones, as_box
    from adoffload.chemistry.dynamics import fcc_lattice
    shim = tmp_path / "shim.cpp"
    shim.write_text(_SHIM.replace("LJ_CU", str(BENCH / "cuda" / "lj.cu")))
    library = tmp_path / "lj.so"
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", str(shim), "-o", str(library)], check=True)
    pos, edge = fcc_lattice(4, 0.8)
    pos = np.ascontiguousarray(pos + 0.05 * np.random.default_rng(1).normal(size=pos.shape))
    ff = ForceField((LennardJones(sigma=1.05, cutoff=2.5),), as_box(edge), backend="jax")
    neighbors = ff.neighbor_list(len(pos), skin=0.3).build(jnp.asarray(pos)).neighbors
    energy, forces = ff.energy_and_forces(jnp.asarray(pos), neighbors)
    nb = np.ascontiguousarray(np.asarray(neighbors, dtype=np.int64))
    n, capacity = nb.shape
    box, e, f = np.full(3, float(edge)), np.zeros(n), np.zeros((n, 3))
    lib = ctypes.CDLL(str(library))
    p, d, i64 = ctypes.c_void_p, ctypes.c_double, ctypes.c_int64
    lib.run_all.argtypes = [p, p, p, d, d, d, p, p, i64, i64]
    lib.run_all(pos.ctypes.data, box.ctypes.data, nb.ctypes.data, 1.05, 1.0, 2.5, e.ctypes.data, f.ctypes.data,
                n, capacity)
    assert e.sum() == pytest.approx(float(energy), rel=1e-12)
    np.testing.assert_allclose(f, forces, atol=1e-10)


@pytest.mark.parametrize("source", ["lj.cu", "rajaperf.cu", "user_kernels.cu"])
def test_cuda_baselines_compile(source, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed here")
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "out.cubin"),
                    str(BENCH / "cuda" / source)], check=True)
