"""Bad input to adoffload.optimize is refused before anything runs, with an adoffload.Error naming it."""
import numpy as np
import pytest

import adoffload as ado
from adoffload.optimize import NonFiniteStartError, least_squares, minimize, shared
from tests.optimize.problems import M, T, decay, rosen, shifted_bowl


def plain_rosen(x):
    return float(np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))


CASES = [
    (lambda: minimize(plain_rosen, np.zeros((2, 3))), ado.ArgumentError, "must be an @ado.func"),
    (lambda: minimize(rosen, np.zeros(3)), ado.ShapeError, r"shape \(batch, n\).*for one problem pass x0\[None, :\]"),
    (lambda: minimize(rosen, np.zeros((2, 0))), ado.ShapeError, r"n >= 1"),
    (lambda: minimize(rosen, np.zeros((2, 3), np.int64)), ado.ArgumentError, "float64 or float32"),
    (lambda: minimize(rosen, [[0.0, 1.0], [0.0]]), ado.ShapeError, r"x0 must be an array of shape \(batch, n\)"),
    (lambda: minimize(rosen, np.array([[0.0, np.nan, 1.0], [0.0, 0.0, 0.0]])), NonFiniteStartError,
     "NaN or infinity in 1 problem.*row 0"),
    (lambda: minimize(rosen, np.zeros((2, 3)), method="newton"), ado.ArgumentError, "unknown method 'newton'"),
    (lambda: minimize(rosen, np.zeros((0, 3)), device="cpu:1"), ado.DeviceNotFoundError, "bad device ordinal"),
    (lambda: least_squares(decay, np.zeros((0, 3)), args=(shared(T), np.zeros((0, M))), m=M, device=""),
     ado.DeviceNotFoundError, "unknown device ''"),
    (lambda: minimize(rosen, np.zeros((2, 3)), method="L-BFGS-B"), ado.ArgumentError, "bounds are not supported"),
    (lambda: minimize(rosen, np.zeros((2, 3)), options={"maxcorr": 5}), ado.ArgumentError, r"unknown option.*maxcorr"),
    (lambda: minimize(rosen, np.zeros((2, 3)), maxiter=0), ado.ArgumentError, "maxiter must be a positive int"),
    (lambda: minimize(rosen, np.zeros((2, 3)), tol=-1.0), ado.ArgumentError, "tol must be a finite number"),
    (lambda: minimize(rosen, np.zeros((2, 3)), args=(1.0,)), ado.ArgumentError,
     r"called with 2 argument\(s\), but 'rosen' takes 1"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=(0.5, np.ones(3))), ado.ShapeError,
     r"args\[1\] has shape \(3,\).*leading axis must be the batch \(2 problems.*shared"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=(True, np.ones(2))), ado.ArgumentError, "is a bool"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=(0.5, np.ones(2, np.complex128))), ado.ArgumentError,
     "dtype complex128"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=(0.5, np.array(1.0))), ado.ArgumentError, "0-d array"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=(0.5, 1j)), ado.ArgumentError, "is complex 1j"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=("centre", 1.0)), ado.ArgumentError, "is str 'centre'"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=(0.5, np.ones((2, 1, 1, 1)))), ado.ShapeError,
     "at most 2 dimensions after the batch"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=(0.5, shared(np.ones((1, 1, 1, 1))))), ado.ShapeError,
     "1 to 3 dimensions"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=(0.5, np.ones((2, 0)))), ado.ShapeError,
     r"args\[1\]: the function would receive an empty array \(shape \(0,\)\)"),
    (lambda: minimize(shifted_bowl, np.zeros((2, 3)), args=(0.5, shared(np.ones((3, 0))))), ado.ShapeError,
     r"empty array \(shape \(3, 0\)\)"),
    (lambda: least_squares(decay, np.zeros((2, 3)), args=(shared(T), np.zeros((2, 0))), m=M), ado.ShapeError,
     "empty array"),
    (lambda: minimize(rosen, np.zeros((2, 3)), method="fire", options={"group": 2}), ado.ArgumentError,
     "group=2 must divide n=3"),
    (lambda: least_squares(decay, np.zeros((2, 3)), args=(shared(T), np.zeros((2, M)))), ado.ArgumentError,
     "m= must be given"),
    (lambda: least_squares(decay, np.zeros((2, 3)), args=(shared(T),), m=M), ado.ArgumentError,
     r"residual\(x, \*args, r\) is called with 3 argument"),
    (lambda: least_squares(decay, np.zeros((2, 3)), args=(shared(T), np.zeros((2, M))), m=M, method="trf"),
     ado.ArgumentError, "unknown method 'trf'"),
    (lambda: least_squares(decay, np.zeros((2, 3)), args=(shared(T), np.zeros((2, M))), m=M, ftol=0, xtol=0, gtol=0),
     ado.ArgumentError, "at least one of ftol, xtol, gtol"),
]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_refused_with_a_named_error(index):
    call, error, message = CASES[index]
    with pytest.raises(error, match=message):
        call()
    assert issubclass(error, ado.Error)


def test_nonfinite_starts_are_value_errors_like_scipys():
    assert issubclass(NonFiniteStartError, ValueError) and issubclass(NonFiniteStartError, ado.Error)


def test_a_wrong_helper_body_is_a_located_kernel_error():
    @ado.func
    def broken(x):
        return x[0] + undefined_name      # noqa: F821

    with pytest.raises(ado.UndefinedNameError, match="undefined_name") as info:
        minimize(broken, np.zeros((2, 2)))
    assert "test_inputs.py" in str(info.value)


def test_a_function_whose_adjoint_needs_a_dynamic_tape_is_refused_naming_it():
    @ado.func
    def until_large(x):
        s = 0.0
        k = 0
        while s < 3.0 and k < 100:
            s = s + ado.exp(x[0] * s) * 0.1 + x[1] * x[1]
            k += 1
        return s

    with pytest.raises(ado.DifferentiationError, match=r"value_and_grad\(until_large\) \(helper at .*test_inputs\.py:"
                                                     r"[0-9]+\).*dynamic tape"):
        minimize(until_large, np.zeros((2, 2)))


def test_starts_in_any_memory_layout_give_the_contiguous_starts_answers():
    """A Fortran-ordered x0, a strided view and a nested list are the starts they hold (the kernel
    launcher takes C-contiguous arrays only: they were refused with its 'pass np.ascontiguousarray')."""
    starts = np.random.default_rng(3).uniform(-1.5, 1.5, (5, 6))
    expected = minimize(rosen, starts[:, :3].copy())
    for x0 in (np.asfortranarray(starts[:, :3]), starts[:, :3], starts[:, ::2][:, :3] * 0 + starts[:, :3],
               starts[:, :3].tolist()):
        result = minimize(rosen, x0)
        np.testing.assert_array_equal(result.x, expected.x)
        np.testing.assert_array_equal(result.nit, expected.nit)
    true = np.array([[1.0, 0.7, 0.1]] * 4)
    y = true[:, :1] * np.exp(-true[:, 1:2] * T) + true[:, 2:]
    x0 = np.asfortranarray(np.tile([0.5, 0.5, 0.0], (4, 1)))
    fit = least_squares(decay, x0, args=(shared(T), y), m=M)
    assert fit.success.all()
    np.testing.assert_allclose(fit.x, true, atol=1e-6)
    np.testing.assert_array_equal(fit.x, least_squares(decay, np.ascontiguousarray(x0), args=(shared(T), y), m=M).x)


class _IntStarts:
    """An array-like with a shape but no dtype, whose numpy conversion holds ints."""
    shape = (2, 3)

    def __array__(self, dtype=None, copy=None):
        return np.zeros(self.shape, np.int64)


def test_an_array_like_start_is_checked_as_numpy_converts_it():
    """Its dtype was taken to be float64 and the int array reached the launcher, which refused it there."""
    with pytest.raises(ado.ArgumentError, match=r"minimize: x0 must be float64 or float32, got int64"):
        minimize(rosen, _IntStarts())
