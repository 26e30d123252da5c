"""The GPU code of a user's gather energy's adjoint (issue 31), read from its PTX on any machine (no GPU
needed: LLVM's NVPTX back end and libdevice): the read-only arrays of an adjoint are ``noalias``, so one
reverse iteration loads the neighbour index once instead of once per shadow atomic, also where the JAX
call promises nothing about its buffers; a gather's scattered adds are not lane-combined (the shuffles and
vote never pay there). The gradients stay those of central differences and of forward mode."""
from __future__ import annotations

import re

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import ToolNotFoundError
from adoffload.runtime.host import HostDevice

from .test_reverse_host_speed import BOX, CUTOFF, _system, check_against_central_differences, pair_energy


def _ptx(kernel, **options) -> str:
    try:
        from adoffload.codegen.gpu.tools import find_libdevice
        find_libdevice()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))
    return kernel.compiled("nvptx", arch="sm_90", proven=kernel.candidate_facts, cache=False, **options).ptx


def _define_line(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"define void @{name}("))


@pytest.mark.parametrize("lean", [False, True])
def test_the_adjoint_marks_only_the_arrays_it_never_writes_noalias(lean):
    """The reverse function gets them, and the kernel's body that forwards its params to it (alias scopes,
    which inlining makes of them, do not survive ir import/export; attributes do); the primal has none."""
    from adoffload.analysis.address_classes import ParallelInfo
    from adoffload.enzyme.activity import CONST, DUP
    from adoffload.enzyme.reverse import reverse
    module, name = pair_energy.ir()
    fn = module.functions[name]
    activity = [DUP if a.name in ("pos", "energy") else CONST for a in fn.args]
    derived = reverse(module, fn, activity, failure_arg=len(fn.args) - 1,
                      parallel=ParallelInfo(thread_args=(0,), uniform_args=frozenset(range(1, len(fn.args))))).function
    assert {a.name for a in derived.args if "noalias" in a.attributes} == {"pos", "neighbors"}
    helper = reverse(module, fn, activity, name="as_a_helper").function     # no parallel: a helper's derivative
    assert not any("noalias" in a.attributes for a in helper.args)
    kernel = ado.vjp(pair_energy, ["pos"], primal_outputs=not lean)
    body = _define_line(kernel.module_text(), kernel.body_name)      # the kernel's body forwards them: it has them too
    assert "ptr noalias %pos," in body and "ptr noalias %neighbors," in body
    assert not any(f"noalias {w}," in body for w in ("%energy", "%d_pos", "%d_energy")) and "noalias %status" not in body
    assert "noalias" not in pair_energy.module_text()


def test_without_launch_noalias_the_adjoint_loads_as_little_as_with_it():
    """ado.jax_kernel's GPU build of this adjoint has an InOut array (d_pos accumulates), so the call
    promises no noalias: before, the neighbour index was loaded again after each d_pos[j] atomic."""
    reverse = ado.vjp(pair_energy, ["pos"], primal_outputs=False)
    plain = _ptx(reverse, scalars_by_reference=True)
    promised = _ptx(reverse, scalars_by_reference=True, noalias=True)
    loads = lambda ptx: len(re.findall(r"\bld\.global\.", ptx))     # noqa: E731
    assert loads(plain) == loads(promised) == 11
    assert len(re.findall(r"atom\.global\.add\.f64", plain)) == 6    # d_pos[j] per pair, d_pos[i] once


@pytest.mark.parametrize("noalias", [False, True])
def test_scattered_adds_of_a_gather_are_not_lane_combined(noalias):
    reverse = ado.vjp(pair_energy, ["pos"], primal_outputs=False)
    ptx = _ptx(reverse, scalars_by_reference=True, noalias=noalias, peer_adds=False)
    assert not re.search(r"\b(shfl|vote|activemask)\b", ptx)
    grouped = _ptx(reverse, scalars_by_reference=True, noalias=noalias)     # peer adds (on by default)
    assert "match.any" in grouped and not re.search(r"\b(shfl\.sync\.(down|up|bfly)|vote)\b", grouped)


def test_the_gradient_through_jax_on_the_host_matches_differences_and_forward_mode():
    """The JAX host call compiles the adjoint without the launcher's noalias (d_pos is InOut there):
    the body's own noalias parameters are what it gets."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    pos, nbr = _system(40, seed=7)
    seed = np.random.default_rng(8).uniform(0.5, 1.5, len(pos))
    energy = ado.jax_kernel(pair_energy)
    grad = np.asarray(jax.grad(lambda p: jnp.sum(jnp.asarray(seed) * energy(p, nbr, BOX, CUTOFF)))(pos))
    d_pos = np.zeros_like(pos)
    ado.vjp(pair_energy, ["pos"])(pos, nbr, BOX, CUTOFF, np.zeros(len(pos)), d_pos=d_pos, d_energy=seed.copy(),
                                  grid=len(pos), device=HostDevice(workers=1))
    np.testing.assert_allclose(grad, d_pos, rtol=1e-12, atol=1e-12)
    rng = np.random.default_rng(9)
    check_against_central_differences(grad, pos, nbr, seed, rng)
    v = rng.normal(size=pos.shape)
    d_energy = np.zeros(len(pos))
    ado.jvp(pair_energy, ["pos"])(pos, nbr, BOX, CUTOFF, np.zeros(len(pos)), d_pos=v, d_energy=d_energy,
                                   grid=len(pos), device=HostDevice(workers=1))
    assert abs(d_energy @ seed - np.sum(v * grad)) <= 1e-11 * max(1.0, abs(d_energy @ seed))
