"""The user_kernels suite's pieces: the hand-written CUDA forces compute the physics our engine derives
from the user's energy kernels (compiled for the host through a shim), and ratios are taken within
one measure and size, to the fastest side of the reference kind."""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from benchmarks.kernels.user import ENERGIES
from benchmarks.suites import user_kernels

CUDA = Path(__file__).resolve().parents[2] / "benchmarks" / "cuda" / "user_kernels.cu"

_SHIM = r"""
#include <cmath>
using std::floor; using std::sqrt; using std::exp;
struct Index3 { long long x, y, z; };
static Index3 blockIdx, threadIdx, blockDim;
#define __global__
#define __device__
#define __forceinline__ inline
template <class T> T __shfl_down_sync(unsigned, T v, int) { return v; }   // one lane: never summed
static double atomicAdd(double* p, double v) { double old = *p; *p += v; return old; }
#include "USER_CU"
extern "C" void run_lj(const double* pos, const int* nb, double box, double s, double e, double c, double* en,
                       double* f, long long n, long long slots) {
  blockDim.x = 1;
  for (long long i = 0; i < n; ++i) { blockIdx.x = i; lj_forces(pos, nb, box, s, e, c, en, f, n, slots); }
}
extern "C" void run_morse(const double* pos, const int* nb, double box, double d, double a, double r0, double c,
                          double* en, double* f, long long n, long long slots) {
  blockDim.x = 1;
  for (long long i = 0; i < n; ++i) { blockIdx.x = i; morse_forces(pos, nb, box, d, a, r0, c, en, f, n, slots); }
}
extern "C" void run_angle(const double* pos, const int* nb, double box, double s, double c0, double c, double* en,
                          double* f, long long n, long long slots) {
  blockDim.x = 1;
  for (long long i = 0; i < n; ++i) { blockIdx.x = i; angle_forces(pos, nb, box, s, c0, c, en, f, n, slots); }
}
"""


@pytest.fixture(scope="module")
def system():
    import jax
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield user_kernels.System(256, jax.devices("cpu")[0])
    jax.config.update("jax_enable_x64", previous)


@pytest.mark.parametrize("potential", user_kernels.POTENTIALS)
def test_hand_written_cuda_forces_are_our_derivative(system, potential, tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("no g++ to compile the CUDA kernels' bodies for the host")
    shim = tmp_path / "shim.cpp"
    shim.write_text(_SHIM.replace("USER_CU", str(CUDA)))
    library = tmp_path / "user.so"
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", str(shim), "-o", str(library)], check=True)
    lib = ctypes.CDLL(str(library))
    pos, nbr, box, *params = system.arguments(potential)
    n, slots = nbr.shape
    energy, force = np.zeros(n), np.zeros_like(pos)
    run = getattr(lib, f"run_{potential}")
    run.argtypes = ([ctypes.c_void_p] * 2 + [ctypes.c_double] * (1 + len(params)) + [ctypes.c_void_p] * 2
                    + [ctypes.c_longlong] * 2)
    run(pos.ctypes.data, nbr.ctypes.data, box, *params, energy.ctypes.data, force.ctypes.data, n, slots)
    # ours: the engine's adjoint of the user's energy kernel
    arrays = (pos, nbr, np.zeros(n), np.zeros_like(pos), np.ones(n))
    user_kernels.vjp_call(potential, arrays, box, "cpu")()
    np.testing.assert_allclose(energy, arrays[2], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(force, -arrays[3], rtol=1e-9, atol=1e-10)
    assert system.compare(potential, float(energy.sum()), force)["force_rel_diff"] < 1e-10


def test_every_energy_has_its_peer_forms():
    from benchmarks.peers.plain_jax import ENERGIES as PLAIN
    assert set(ENERGIES) == set(PLAIN) == set(user_kernels.POTENTIALS)


def test_ratios_are_taken_per_measure_and_size_against_the_fastest_reference():
    rows = [{"measure": "lj", "size": 10, "side": "hand-written CUDA forces (1 lane/atom)", "median_ms": 2.0},
            {"measure": "lj", "size": 10, "side": "hand-written CUDA forces (2 lanes/atom)", "median_ms": 1.0},
            {"measure": "lj", "size": 10, "side": "ours: jax.value_and_grad (ado.jax_kernel)", "median_ms": 3.0,
             "potential": "lj"},
            {"measure": "lj", "size": 20, "side": "ours: jax.value_and_grad (ado.jax_kernel)", "median_ms": 3.0},
            {"measure": "lj, first call", "size": 10, "side": "hand-written CUDA forces (1 lane/atom)",
             "first_call_ms": 0.1},
            {"measure": "lj", "size": 10, "side": "ours: ado.vjp on CuPy arrays", "skipped": "no CuPy"}]
    user_kernels.set_ratios(rows, "vs_cuda", "hand-written CUDA")
    assert [r.get("vs_cuda") for r in rows] == [2.0, 1.0, 3.0, None, None, None]
    assert rows[2]["vs_cuda_side"] == "hand-written CUDA forces (2 lanes/atom)"
    lines = user_kernels.targets(rows + [{"measure": user_kernels.LLM_C, "skipped": user_kernels.LLM_C_NO_CLANG}])
    assert [(line["measured"], line["met"]) for line in lines if "ado.jax_kernel" in line["measure"]] == [(3.0, "NO")]
    assert lines[-1]["measured"] == "not measured" and lines[-1]["met"] is None


def test_the_gpt2_row_is_a_target_with_its_measured_ratio():
    from benchmarks import gpt2
    rows = [{"measure": gpt2.MEASURE, "side": gpt2.OURS, "size": 5, "config": "B=1", "median_ms": 3.0, "vs_hand": 1.5},
            {"measure": gpt2.MEASURE, "side": gpt2.HAND, "size": 5, "config": "B=1", "median_ms": 2.0, "vs_hand": 1.0},
            {"measure": gpt2.MEASURE, "side": gpt2.OURS, "size": 6, "config": "B=2", "median_ms": 7.0, "vs_hand": 2.5}]
    lines = [line for line in user_kernels.targets(rows) if "GPT-2" in line["measure"]]
    assert [(line["measured"], line["target"], line["met"]) for line in lines] == [(1.5, "<= 2", "yes"), (2.5, "<= 2", "NO")]
