"""The RAJAPerf benchmark's CPU-side pieces: every jax.numpy baseline computes what numpy's
reference does, in f64 (the run enables x64; without it XLA would time f32), the large-array
check catches wrong elements at the ends and in the middle, and the reductions run first."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks import launching, targets
from benchmarks.kernels.rajaperf import CASES
from benchmarks.suites import derivatives, rajaperf


@pytest.fixture(scope="module")
def jax_x64():
    import jax
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


@pytest.mark.parametrize("case", [c for c in CASES if c.jnp is not None], ids=lambda c: c.name)
def test_jnp_baseline_matches_the_numpy_reference(jax_x64, case):
    import jax.numpy as jnp
    n = 1000
    host = case.make(n, np.random.default_rng(0))
    expected = case.numpy(host)
    got = case.jnp({**{k: jnp.asarray(v) for k, v in host.items()}, "n": n}, jnp)
    got = got if isinstance(got, list) else [got]
    for name, value in zip(expected, got):   # outputs in the order numpy's reference names them
        value = np.asarray(value)
        assert value.dtype in (np.float64, np.int64, np.int32), (name, value.dtype)
        np.testing.assert_allclose(value.reshape(np.shape(expected[name])), expected[name], rtol=1e-9, atol=1e-9)


class _FakeGpu:
    def __init__(self, device_arrays):
        self.device_arrays = device_arrays

    def download(self, buf, like):
        return self.device_arrays[buf]


@pytest.mark.parametrize("where", ["first", "end of the head", "sampled middle", "last"])
def test_large_arrays_are_checked_at_samples_and_ends(monkeypatch, where):
    monkeypatch.setattr(launching, "FULL_CHECK_LIMIT", 1 << 14)
    monkeypatch.setattr(launching, "SAMPLES", 1 << 10)
    n = (1 << 16) + 100
    want = np.arange(n, dtype=np.float64)
    check = launching.Checker({"x": want}, n)
    assert check.how.startswith("sampled") and len(check.positions["x"]) < n
    positions = check.positions["x"]
    middle = positions[(positions > 4096) & (positions < n - 4096)]
    bad = {"first": 0, "end of the head": 4095, "sampled middle": middle[len(middle) // 2], "last": n - 1}[where]
    got = want.copy()
    assert check(_FakeGpu({"dx": got}), {"x": "dx"}, {"x": want})
    got[bad] += 1.0
    assert not check(_FakeGpu({"dx": got}), {"x": "dx"}, {"x": want})


def test_small_arrays_are_checked_in_full():
    want = np.arange(1000.0)
    check = launching.Checker({"x": want}, 1000)
    got = want.copy()
    got[517] = -1
    assert check.how == "full" and not check(_FakeGpu({"d": got}), {"x": "d"}, {"x": want})


def test_reductions_run_first():
    names = [c.name for c in launching.ordered_cases()]
    assert set(names[:len(launching.REDUCTIONS)]) == launching.REDUCTIONS and len(names) == len(CASES)


def test_an_unknown_kernel_is_a_benchmark_error():
    from benchmarks.results import BenchmarkError
    assert [c.name for c in launching.select_cases(["stream_dot", "basic_daxpy"])] == ["stream_dot", "basic_daxpy"]
    with pytest.raises(BenchmarkError, match="stream_dott"):
        launching.select_cases(["stream_dott"])


def test_the_report_knows_every_reduction():
    """The report's issue-12 rows (tuned CUDA / ours, XLA / ours) cover the cases launched as reductions."""
    assert set(targets.REDUCTIONS) == launching.REDUCTIONS <= {c.name for c in CASES}


def test_rsqrt_trap_int_is_trap_int_with_the_device_rsqrt():
    """basic_trap_int_rsqrt differs from basic_trap_int only in calling ado.rsqrt (on the host the
    same IEEE 1/sqrt), and both compute numpy's sum."""
    import inspect
    from benchmarks.kernels.rajaperf import basic_trap_int, basic_trap_int_rsqrt
    assert "ado.rsqrt(" in inspect.getsource(basic_trap_int_rsqrt.pyfunc)
    assert "ado.rsqrt(" not in inspect.getsource(basic_trap_int.pyfunc)
    case = next(c for c in CASES if c.name == "basic_trap_int_rsqrt")
    host = case.make(1000, None)
    want = case.numpy(host)["sumx"]
    for k in (basic_trap_int, basic_trap_int_rsqrt):
        args = {**host, "sumx": np.zeros(1)}
        k(*[args[p.name] for p in k.signature.params], grid=case.grid(1000))
        np.testing.assert_allclose(args["sumx"], want, rtol=1e-13)


def test_a_wrong_reduction_never_meets_its_target():
    rows = [{"kernel": "stream_dot", "n": 10, "ours_ms": 1.0, "cuda_ms": 2.0, "jnp_ms": 3.0, "correct": False,
             "cuda_correct": True},
            {"kernel": "basic_pi_reduce", "n": 10, "ours_ms": 1.0, "cuda_ms": 2.0, "correct": True, "cuda_correct": True}]
    lines = {r["measure"]: r for r in targets.targets({"rajaperf": {"rows": rows}})}
    assert lines["n=10: stream_dot: tuned CUDA time / ours [ours WRONG]"]["met"] == "NO"
    assert lines["n=10: stream_dot: XLA time / ours [ours WRONG]"]["met"] == "NO"
    assert lines["n=10: basic_pi_reduce: tuned CUDA time / ours"]["met"] == "yes"
    assert lines["n=10: kernels whose result (ours or CUDA's) differs from numpy"]["measured"] == "stream_dot"


def test_row_launch_of_nested_init_is_what_the_cuda_baseline_launches():
    from adoffload.codegen.gpu.rows import row_blocks
    grid = next(c for c in CASES if c.name == "basic_nested_init").grid(1 << 26)
    assert row_blocks(grid, launching.BLOCK) == (26, 102, 102)


def test_rajaperf_summary_takes_the_geomean_of_measured_rows_only():
    rows = [{"kernel": "a", "n": 10, "ours_ms": 2.0, "cuda_ms": 1.0, "ratio": 2.0},
            {"kernel": "b", "n": 10, "ours_ms": 1.0, "cuda_ms": 2.0, "ratio": 0.5},
            {"kernel": "c", "n": 10, "skipped": "not run: the suite's budget (1 s) was spent"}]
    assert rajaperf.report(rows)[1] == "- n = 10: primal / CUDA geomean over 2 of 3 kernels: 1"


def test_array_bytes_count_what_each_derivative_kernel_touches():
    import adoffload as ado
    from benchmarks.kernels.rajaperf import stream_copy
    n = 64
    host = {"a": np.ones(n), "c": np.zeros(n)}
    assert derivatives.array_bytes(stream_copy, host) == 16 * n                    # a read, c written
    timed = {mode: derive(stream_copy, ["a"], primal_outputs=not lean) for mode, derive, lean in derivatives.DERIVATIVES}
    assert timed["jvp"] is ado.jvp(stream_copy, ["a"], primal_outputs=False)
    counts = {mode: derivatives.array_bytes(k, derivatives.derived_values(k, host)) for mode, k in timed.items()}
    # lean adjoint: d_c read, d_a written (a is loaded once per element); full: also a read, c
    # written, d_c read and cleared, d_a accumulated
    assert counts == {"jvp": 16 * n, "vjp": 16 * n, "jvp_full": 32 * n, "vjp_full": 48 * n}
