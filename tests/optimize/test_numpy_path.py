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
