"""adoffload.optimize.compile_ahead: the kernel of a JAX minimize call built on the compile-ahead thread."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import adoffload as ado  # noqa: E402
from adoffload import codegen  # noqa: E402
from adoffload.errors import ArgumentError  # noqa: E402
from adoffload.optimize import compile_ahead, generate, minimize  # noqa: E402

jax.config.update("jax_enable_x64", True)


def _bowl_source():
    # a fresh helper per test: the generated kernels are cached per helper (generate._KERNELS)
    @ado.func
    def bowl(x, c, w):
        s = 0.0
        for i in range(len(x)):
            s += w * (x[i] - c) ** 2
        return s
    return bowl


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))


def _count_compiles(monkeypatch):
    calls = []
    real = codegen.compile_for_target

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)
    monkeypatch.setattr(codegen, "compile_for_target", counted)
    return calls


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the JAX call runs on the host here")
def test_the_call_finds_the_kernel_built_ahead(fresh_cache, monkeypatch):
    bowl = _bowl_source()
    x0, w = np.random.default_rng(1).normal(size=(6, 3)), np.linspace(0.5, 2.0, 6)
    built = compile_ahead(bowl, jax.ShapeDtypeStruct(x0.shape, x0.dtype), args=(0.25, jax.ShapeDtypeStruct(w.shape, w.dtype)),
                          method="lbfgs", options={"maxcor": 4}, platform="cpu").result(timeout=600)
    assert built and all(c.target == "host" for c in built)
    calls = _count_compiles(monkeypatch)
    got = jax.jit(lambda x, w: minimize(bowl, x, args=(0.25, w), options={"maxcor": 4}).x)(jnp.asarray(x0), jnp.asarray(w))
    assert calls == []            # neither generated nor compiled again
    reference = minimize(bowl, x0, args=(0.25, w), options={"maxcor": 4})
    np.testing.assert_array_equal(np.asarray(got), reference.x)


def test_cuda_builds_ptx_and_cubin_for_the_given_arch(fresh_cache):
    from adoffload.codegen.gpu import tools
    from adoffload.errors import ToolNotFoundError
    try:
        tools.find_libdevice()
    except ToolNotFoundError as exc:
        pytest.skip(str(exc))
    bowl = _bowl_source()
    (compiled,) = compile_ahead(bowl, jax.ShapeDtypeStruct((64, 3), np.float64), args=(0.25, 1.0), method="fire",
                                platform="cuda", archs=["sm_90"]).result(timeout=600)
    assert compiled.target == "nvptx" and ".target sm_90" in compiled.ptx
    pending = compiled.pending_cubin("sm_90")
    try:
        tools.find_ptxas()
    except ToolNotFoundError:
        assert pending.result() is None and "ptxas" in pending.reason
    else:
        assert pending.result()[:4] == b"\x7fELF"


def test_a_bad_call_is_the_futures_exception(fresh_cache):
    bowl = _bowl_source()
    future = compile_ahead(bowl, jax.ShapeDtypeStruct((4, 3), np.float64), args=(0.25, 1.0), method="newton",
                           platform="cpu")
    assert isinstance(future.exception(timeout=60), ArgumentError)
    with pytest.raises(ArgumentError, match="unknown method 'newton'"):
        future.result()


def test_one_kernel_when_two_threads_ask_at_once(monkeypatch):
    import threading
    made, gate = [], threading.Event()

    def make():
        made.append(1)
        gate.wait(5)
        return object()
    key = ("test", object())
    results = []
    threads = [threading.Thread(target=lambda: results.append(generate._cached(key, make))) for _ in range(3)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert len(made) == 1 and len({id(r) for r in results}) == 1


def test_the_x64_mode_is_read_at_the_call_not_on_the_build_thread(monkeypatch):
    """A program that enables x64 right after compile_ahead (lj_clusters did) must not get a kernel
    for the other integer type: that build is never used, and the call builds its own, serially."""
    from adoffload.jax import ahead as jax_ahead
    from adoffload.optimize import ahead
    builds, seen = [], []

    class Seen(Exception):
        pass

    def spy(*args, **kwargs):
        seen.append(kwargs["I"])
        raise Seen
    monkeypatch.setattr(jax_ahead, "submit", builds.append)        # hold the build instead of starting it
    monkeypatch.setattr(ahead, "minimize_call", spy)
    bowl = _bowl_source()
    for x64, expected in ((True, "ado.i64"), (False, "ado.i32")):
        jax.config.update("jax_enable_x64", x64)
        try:
            compile_ahead(bowl, jax.ShapeDtypeStruct((4, 3), np.float32), args=(0.25, 1.0), platform="cpu")
        finally:
            jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_enable_x64", not x64)          # the caller changes the mode before the build runs
        try:
            with pytest.raises(Seen):
                builds.pop()()
        finally:
            jax.config.update("jax_enable_x64", True)
        assert seen.pop() == expected
