"""The chemistry backend choice (issue 14, item 6): a failure of the adoffload kernels is an
error, never a quiet switch to plain JAX; ``auto`` falls back only for a missing device, and
says so; the first use of the backend may happen inside ``jax.jit``."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado
from adoffload.chemistry import backend as chem_backend
from adoffload.chemistry import reference


@pytest.fixture
def fresh_backend():
    """Forget the checked backend, so the next use is the first one (and again afterwards)."""
    caches = (chem_backend._kernel_backend, chem_backend._adjoint_smoke_test)
    for cache in caches:
        cache.cache_clear()
    yield
    for cache in caches:
        cache.cache_clear()


def _has_cuda() -> bool:
    try:
        from adoffload.runtime import get_device
        get_device("cuda")
        return True
    except Exception:  # noqa: BLE001 - any failure means no usable GPU
        return False


def test_first_use_inside_jit_works(fresh_backend):
    pos = jnp.asarray([[0.0, 0.0, 0.0], [1.1, 0.2, -0.1], [0.3, 1.2, 0.4]])

    @jax.jit
    def energy(x):
        return jnp.sum(chem_backend.get_backend("adoffload").cluster_lj_energy(x, 1.0, 1.0))
    np.testing.assert_allclose(energy(pos), jnp.sum(reference.cluster_lj_energy(pos, 1.0, 1.0)), rtol=1e-12)


def test_a_compile_failure_is_raised_not_reported_unavailable(fresh_backend, monkeypatch):
    def broken(*args, **kwargs):
        raise ado.CompilationError("ptxas failed on the LJ kernel (simulated)")
    monkeypatch.setattr(ado, "jax_kernel", broken)
    with pytest.raises(ado.CompilationError, match="simulated"):
        chem_backend.available("adoffload")
    with pytest.raises(ado.CompilationError, match="simulated"):
        chem_backend.default_backend()


def test_a_wrong_self_check_value_is_an_error(fresh_backend, monkeypatch):
    monkeypatch.setattr(chem_backend.reference, "cluster_lj_energy", lambda pos, s, e: 1.0 + 0.0 * pos[:, 0])
    with pytest.raises(ado.BackendCheckError, match="a bug in adoffload"):
        chem_backend.get_backend("adoffload")


def test_auto_falls_back_only_for_a_missing_device(examples_path, capsys, fresh_backend, monkeypatch):
    import common
    assert common.pick_backend("auto", "cpu") == "adoffload"
    if not _has_cuda():
        assert common.pick_backend("auto", "cuda") == "jax"
        assert "note: --backend auto runs the plain-JAX reference backend: no cuda device" in capsys.readouterr().out
        with pytest.raises(SystemExit, match="--backend adoffload: no cuda device"):
            common.pick_backend("adoffload", "cuda")
    monkeypatch.setattr(ado, "jax_kernel", lambda *a, **k: (_ for _ in ()).throw(ado.CompilationError("simulated")))
    chem_backend._kernel_backend.cache_clear()
    with pytest.raises(ado.CompilationError):
        common.pick_backend("auto", "cpu")


def test_the_self_checks_compile_whole_programs_not_single_operations(fresh_backend):
    """Each side of a self-check is one jitted program of its arrays: op by op they were ~85 XLA compiles of
    one operation each (about 2.4 s of a script's start on the host, more on a GPU)."""
    jax.clear_caches()
    compiles = []

    def listen(event, duration, **kwargs):
        if event.endswith("backend_compile_duration"):
            compiles.append(kwargs.get("fun_name"))
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        assert chem_backend.available("adoffload", device="cpu") == (True, "")
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert 0 < len(compiles) <= 40, compiles
