"""adoffload.jax.ahead.compile_ahead: a call's target built on the compile-ahead thread, found by the lowering."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import adoffload as ado
from adoffload import codegen
from adoffload.errors import JaxIntegrationError
from adoffload.jax.ahead import compile_ahead


def _kernels():
    @ado.kernel
    def scaled(x: ado.In[ado.f64], a: ado.f64, out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = a * x[i] + 1.0

    @ado.kernel
    def newton(a: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        y = a[i] + 1.0
        while ado.abs(y * y - a[i]) > 1e-13 * a[i]:
            y = 0.5 * (y + a[i] / y)
        out[i] = y
    return scaled, newton


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the JAX call runs on the host here")
def test_the_lowering_finds_the_build(fresh_cache, monkeypatch):
    scaled, _ = _kernels()
    x = np.linspace(0.0, 1.0, 50)
    built = compile_ahead(scaled, [x.shape, ()], grid=50, out_shapes=[(50,)], platform="cpu").result(timeout=600)
    assert [c.target for c in built] == ["host"]
    calls = []
    monkeypatch.setattr(codegen, "compile_for_target", lambda *a, **k: calls.append(a) or pytest.fail("compiled again"))
    got = jax.jit(lambda x: ado.jax_kernel(scaled)(x, 2.0))(jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(got), 2.0 * x + 1.0)
    assert calls == []


def test_a_dynamic_tape_builds_its_counting_and_scan_kernels_for_cuda(fresh_cache):
    from adoffload.codegen.gpu import tools
    from adoffload.errors import ToolNotFoundError
    try:
        tools.find_libdevice()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))
    _, newton = _kernels()
    adjoint = ado.vjp(newton, ["a"])
    assert adjoint.tape is not None
    shapes = [(p.name, p) for p in adjoint.signature.params]
    operands = [(37,) for name, p in shapes if not (p.is_array and p.type.intent == "out")]
    outs = [(37,) for name, p in shapes if p.is_array and p.type.intent == "out"]
    built = compile_ahead(adjoint, operands, grid=37, out_shapes=outs, platform="cuda", archs=["sm_80"]).result(timeout=900)
    assert len(built) > 2 and all(c.target == "nvptx" and ".target sm_80" in c.ptx for c in built)
    assert len({c.entry_name for c in built}) == len(built)      # the kernel, its counter, the scans
    try:
        tools.find_ptxas()
    except ToolNotFoundError:
        return
    assert all(c.pending_cubin("sm_80").result()[:4] == b"\x7fELF" for c in built)


def test_other_platforms_are_refused(fresh_cache):
    scaled, _ = _kernels()
    future = compile_ahead(scaled, [(4,), ()], grid=4, out_shapes=[(4,)], platform="rocm", archs=["gfx942"])
    with pytest.raises(JaxIntegrationError, match="'cpu' and 'cuda'"):
        future.result(timeout=60)
