"""The numpy path of adoffload.optimize: messages without a fixed-width copy per problem, and Out
arrays that need no zeroing by the API (whatever they hold before the launch, the results are the same)."""
import numpy as np
import pytest

from adoffload.optimize import api, least_squares, minimize, shared
from adoffload.optimize.status import MESSAGES, messages
from tests.optimize.problems import M, T, decay, decay_data, rosen


def test_messages_are_the_shared_strings_of_each_code():
    status = np.array([[1, 2, 3, 4], [0, -1, -2, -3]])
    got = messages(status)
    assert got.shape == status.shape and got.dtype == object
    for code, text in zip(status.ravel(), got.ravel()):
        assert text is MESSAGES[int(code)]                 # one str object per code, 8 bytes a problem
    assert messages(np.array([9, -7, 1])).tolist() == ["status code 9", "status code -7", MESSAGES[1]]
    assert messages(np.zeros(0, np.int64)).shape == (0,)


def _garbage(shape, dtype):
    """What np.empty may hand out: NaN floats, large ints."""
    dtype = np.dtype(dtype)
    return np.full(shape, np.nan if dtype.kind == "f" else 123456789, dtype)


@pytest.mark.parametrize("method", ["lm", "gn"])
def test_least_squares_results_do_not_depend_on_what_the_out_arrays_held(method, monkeypatch):
    true, y = decay_data(np.random.default_rng(4), 300)
    x0 = np.tile([1.0, 1.0, 0.0], (300, 1))
    zeroed = least_squares(decay, x0, args=(shared(T), y), m=M, method=method)
    monkeypatch.setattr(api, "_output", _garbage)
    dirty = least_squares(decay, x0, args=(shared(T), y), m=M, method=method)
    assert set(zeroed) == set(dirty)
    for key in zeroed:
        assert np.array_equal(zeroed[key], dirty[key]), key
    assert np.isfinite(dirty.fun).all() and np.isfinite(dirty.x).all()


def test_minimize_results_do_not_depend_on_what_the_out_arrays_held(monkeypatch):
    x0 = np.random.default_rng(6).uniform(-1.5, 1.5, (200, 3))
    clean = minimize(rosen, x0)
    monkeypatch.setattr(api, "_output", _garbage)
    dirty = minimize(rosen, x0)
    for key in clean:
        assert np.array_equal(clean[key], dirty[key]), key


@pytest.mark.parametrize("n", [1, 3, 16, 17])
def test_max_abs_rows_equals_numpys_reduction(n):
    a = np.random.default_rng(n).standard_normal((50, n))
    a[3, n // 2] = np.nan
    a[7, 0] = -np.inf
    got, expected = api.max_abs_rows(a), np.max(np.abs(a), axis=1)
    assert got.dtype == expected.dtype and np.array_equal(got, expected, equal_nan=True)
    assert np.isnan(got[3]) and got[7] == np.inf
    assert api.max_abs_rows(np.zeros((0, n))).shape == (0,)


def test_deferred_fields_are_made_once_on_first_access():
    from adoffload.optimize.result import Deferred, OptimizeResult
    calls = []

    def make():
        calls.append(1)
        return np.arange(3.0)
    shared_field = Deferred(make)
    r = OptimizeResult({"status": np.array([1, 2]), "success": np.array([True, True]), "fun": shared_field,
                        "grad": shared_field})
    assert calls == []
    assert "fun" in repr(r) and calls == []                 # the summary reads status and success only
    assert np.array_equal(r.fun, np.arange(3.0)) and r["grad"] is r["fun"] and calls == [1]
    lazy = OptimizeResult({"fun": Deferred(lambda: np.ones(2))})
    assert np.array_equal(lazy.get("fun"), np.ones(2)) and lazy.get("absent", 7) == 7
    for view in (lambda d: dict(d.items())["fun"], lambda d: d.values()[0], lambda d: d.copy()["fun"]):
        assert np.array_equal(view(OptimizeResult({"fun": Deferred(lambda: np.ones(2))})), np.ones(2))
    import pickle
    back = pickle.loads(pickle.dumps(OptimizeResult({"fun": Deferred(lambda: np.ones(2))})))
    assert type(back) is OptimizeResult and np.array_equal(back["fun"], np.ones(2))


class _Buffer:
    """Stands in for a DeviceArray on the host (tests/optimize/test_gpu.py runs the real ones)."""
    def __init__(self, shape, dtype, device):
        self.array, self.fetched = np.empty(shape, dtype), 0

    def to_numpy(self):
        self.fetched += 1
        return self.array.copy()


def test_device_deferred_residuals_and_gradients_are_the_eager_ones(monkeypatch):
    """The GPU path's deferral (residuals and gradients left in device buffers until read), with host
    arrays standing in for the device buffers: each is fetched once, when read, and every field equals
    the eager path's."""
    true, y = decay_data(np.random.default_rng(5), 200)
    x0 = np.tile([1.0, 1.0, 0.0], (200, 1))
    eager = least_squares(decay, x0, args=(shared(T), y), m=M)
    buffers = []

    def device_output(shape, dtype, device):
        buffers.append(_Buffer(shape, dtype, device))
        return buffers[-1]
    real_run = api._run

    def run(kernel, inputs, shapes, dtype, batch, device, use_jax):
        # the launch itself sees the host arrays behind the stand-ins
        original = kernel

        class Unwrap:
            def __call__(self, *args, **kwargs):
                return original(*[a.array if isinstance(a, _Buffer) else a for a in args], **kwargs)
        return real_run(Unwrap(), inputs, shapes, dtype, batch, device, use_jax)
    monkeypatch.setattr(api, "_on_gpu", lambda device: True)
    monkeypatch.setattr(api, "_device_output", device_output)
    monkeypatch.setattr(api, "_run", run)
    lazy = least_squares(decay, x0, args=(shared(T), y), m=M)
    assert isinstance(dict.__getitem__(lazy, "fun"), api.Deferred)
    assert isinstance(dict.__getitem__(lazy, "optimality"), api.Deferred)
    assert [b.fetched for b in buffers] == [0, 0]                  # r_out, g_out: nothing read yet
    assert np.array_equal(eager.x, lazy.x) and [b.fetched for b in buffers] == [0, 0]
    for key in eager:
        assert np.array_equal(eager[key], lazy[key]), key
    assert [b.fetched for b in buffers] == [1, 1]                  # optimality used the fetched grad
    x1 = np.random.default_rng(7).uniform(-1.5, 1.5, (50, 3))
    monkeypatch.undo()
    clean = minimize(rosen, x1)
    monkeypatch.setattr(api, "_on_gpu", lambda device: True)
    monkeypatch.setattr(api, "_device_output", device_output)
    monkeypatch.setattr(api, "_run", run)
    deferred = minimize(rosen, x1)
    assert isinstance(dict.__getitem__(deferred, "jac"), api.Deferred)
    for key in clean:
        assert np.array_equal(clean[key], deferred[key]), key
