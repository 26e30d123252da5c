"""Inputs a hurried user passes to the numpy launcher and its derivative launchers (probe-launch).

Each bad input must give the right numbers or an ``adoffload.Error`` naming the parameter, on the
first launch and on later ones (a cached signature, its native entry), never a crash or a silently
ignored part of the argument.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import ArgumentError, BoundsError


@ado.kernel
def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


REV = ado.vjp(saxpy, wrt=["a", "x"])
FWD = ado.jvp(saxpy, wrt=["a", "x"])
N = 8


def _good_launches(k: int = 3) -> None:
    """Launch the signature the probes use often enough that it has a plan and a native entry."""
    x, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    for _ in range(k):
        out = np.empty(N, np.float32)
        saxpy(2.0, x, y, out, grid=N)
        REV(2.0, x, y, out, d_a=np.zeros(1, np.float32), d_x=np.zeros(N, np.float32),
            d_out=np.ones(N, np.float32), grid=N)
        FWD(2.0, x, y, out, d_a=1.0, d_x=np.ones(N, np.float32), d_out=np.empty(N, np.float32), grid=N)


def _read_only_memmap(tmp_path, values: np.ndarray) -> np.memmap:
    path = tmp_path / "x.bin"
    values.tofile(path)
    return np.memmap(path, dtype=values.dtype, mode="r", shape=values.shape)


class _ReadOnlySub(np.ndarray):
    pass


@pytest.mark.parametrize("make", ["memmap", "subclass"])
def test_a_read_only_ndarray_subclass_is_read_as_input(tmp_path, make):
    # was: BufferError from the call key's DLPack export of the read-only array (numpy refuses to
    # export read-only arrays), before any check ran
    _good_launches()
    values = np.arange(N, dtype=np.float32) * 0.5
    if make == "memmap":
        x = _read_only_memmap(tmp_path, values)
    else:
        x = values.copy().view(_ReadOnlySub)
        x.setflags(write=False)
    y = np.ones(N, np.float32)
    for _ in range(3):
        out = np.full(N, -1, np.float32)
        saxpy(3.0, x, y, out, grid=N)
        np.testing.assert_array_equal(out, 3.0 * values + 1)
        d_a, d_x, d_out = np.zeros(1, np.float32), np.zeros(N, np.float32), np.arange(N, dtype=np.float32)
        REV(3.0, x, y, out, d_a=d_a, d_x=d_x, d_out=d_out, grid=N)
        np.testing.assert_allclose(d_a, [np.dot(values, d_out)])
        np.testing.assert_array_equal(d_x, 3.0 * d_out)
        d_y = np.empty(N, np.float32)
        FWD(3.0, x, y, out, d_a=2.0, d_x=x, d_out=d_y, grid=N)
        np.testing.assert_array_equal(d_y, 2.0 * values + 3.0 * values)


class _HostExporter:
    """A host array whose DLPack export fails (as numpy's does for read-only data), readable through
    ``__array__``."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values

    def __dlpack__(self, stream=None, **kwargs):
        raise BufferError("cannot export")

    def __dlpack_device__(self):
        return (1, 0)


def test_a_host_object_whose_dlpack_export_fails_is_read_through_array():
    # was: the producer's BufferError escaped from the call key
    values = np.arange(N, dtype=np.float32)
    y = np.ones(N, np.float32)
    for _ in range(3):
        out = np.zeros(N, np.float32)
        saxpy(2.0, _HostExporter(values), y, out, grid=N)
        np.testing.assert_array_equal(out, 2 * values + 1)


@pytest.mark.parametrize("where", ["x", "out", "d_x", "d_out"])
def test_masked_arrays_are_refused_naming_the_parameter(where):
    # was: run on the data with the mask ignored (masked inputs read, masked outputs written and
    # still shown as masked)
    _good_launches()
    x, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    mask = np.arange(N) % 2 == 0
    for _ in range(3):
        args = {"x": x, "out": np.zeros(N, np.float32), "d_x": np.zeros(N, np.float32),
                "d_out": np.ones(N, np.float32)}
        args[where] = np.ma.masked_array(args[where], mask=mask)
        with pytest.raises(ArgumentError, match=rf"parameter '{where}': a masked array"):
            if where in ("x", "out"):
                saxpy(2.0, args["x"], y, args["out"], grid=N)
            else:
                REV(2.0, args["x"], y, args["out"], d_a=np.zeros(1, np.float32), d_x=args["d_x"],
                    d_out=args["d_out"], grid=N)
        if where == "out":
            assert not args["out"].data.any()          # nothing was written


def test_a_new_shape_with_the_same_dtypes_never_reuses_cached_extents():
    for n in (8, 8, 8, 5, 5, 5, 12, 12, 8, 8):
        x = np.arange(n, dtype=np.float32)
        y = np.ones(n, np.float32)
        out = np.full(n, -1, np.float32)
        saxpy(2.0, x, y, out, grid=n)
        np.testing.assert_array_equal(out, 2 * x + 1)
        d_a, d_x = np.zeros(1, np.float32), np.zeros(n, np.float32)
        REV(2.0, x, y, out, d_a=d_a, d_x=d_x, d_out=np.ones(n, np.float32), grid=n)
        assert d_a[0] == x.sum() and (d_x == 2).all()
    # a fixed grid over arrays that shrink: the bounds check of the smaller shape fires
    for _ in range(3):
        saxpy(2.0, np.zeros(8, np.float32), np.zeros(8, np.float32), np.zeros(8, np.float32), grid=8)
    with pytest.raises(BoundsError, match="shape \\(4,\\)"):
        saxpy(2.0, np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32), grid=8)


def test_a_read_only_output_is_refused_on_a_cached_signature_too():
    _good_launches()
    x, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    for _ in range(3):
        out = np.zeros(N, np.float32)
        out.setflags(write=False)
        with pytest.raises(ArgumentError, match="parameter 'out': the array is read-only"):
            saxpy(2.0, x, y, out, grid=N)
        d_x = np.zeros(N, np.float32)
        d_x.setflags(write=False)
        with pytest.raises(ArgumentError, match="parameter 'd_x': the array is read-only"):
            REV(2.0, x, y, np.zeros(N, np.float32), d_a=np.zeros(1, np.float32), d_x=d_x,
                d_out=np.ones(N, np.float32), grid=N)
        assert not out.any() and not d_x.any()


def test_threads_launching_one_kernel_and_its_vjp_get_their_own_results():
    errors: list = []
    start = threading.Barrier(4)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        start.wait()
        try:
            for _ in range(150):
                n = int(rng.choice([8, 16, 33]))
                a = float(rng.integers(1, 5))
                x, y = rng.random(n).astype(np.float32), rng.random(n).astype(np.float32)
                out = np.empty(n, np.float32)
                saxpy(a, x, y, out, grid=n)
                d_a, d_x = np.zeros(1, np.float32), np.zeros(n, np.float32)
                d_out = rng.random(n).astype(np.float32)
                kept = d_out.copy()
                REV(a, x, y, out, d_a=d_a, d_x=d_x, d_out=d_out, grid=n)
                if not (np.allclose(out, a * x + y) and np.allclose(d_x, a * kept)
                        and np.allclose(d_a, [np.dot(x, kept)], rtol=1e-5) and (d_out == kept).all()):
                    errors.append((seed, n, a))
        except Exception as exc:          # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


class _DLPackOnly:
    """A host array exported only through DLPack (no ``__array__``)."""

    def __init__(self, values):
        self.values = values

    def __dlpack__(self, stream=None, **kwargs):
        return self.values.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.values.__dlpack_device__()


def test_a_host_dlpack_producer_is_read_and_written_in_place():
    # was: np.asarray made a 0-d object array of it: "expected dtype float32, got object"
    values, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    for _ in range(3):
        out = np.zeros(N, np.float32)
        saxpy(2.0, _DLPackOnly(values), y, _DLPackOnly(out), grid=N)
        np.testing.assert_array_equal(out, 2 * values + 1)
        d_x = np.zeros(N, np.float32)
        REV(2.0, _DLPackOnly(values), y, out, d_a=np.zeros(1, np.float32), d_x=_DLPackOnly(d_x),
            d_out=np.ones(N, np.float32), grid=N)
        np.testing.assert_array_equal(d_x, np.full(N, 2, np.float32))


class _CopyingArray:
    """An array-like whose ``__array__`` returns a new copy each time (as many wrappers do)."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values.copy()


def test_an_array_like_that_copies_is_read_but_refused_where_the_kernel_writes():
    # was: run on a temporary copy, the results silently lost
    values, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    for _ in range(3):
        out = np.zeros(N, np.float32)
        saxpy(2.0, _CopyingArray(values), y, out, grid=N)
        np.testing.assert_array_equal(out, 2 * values + 1)
        with pytest.raises(ArgumentError, match="parameter 'out': .*new copy on each call"):
            saxpy(2.0, values, y, _CopyingArray(out), grid=N)
        with pytest.raises(ArgumentError, match="parameter 'd_x': .*new copy on each call"):
            REV(2.0, values, y, out, d_a=np.zeros(1, np.float32), d_x=_CopyingArray(np.zeros(N, np.float32)),
                d_out=np.ones(N, np.float32), grid=N)
        # a seed the launcher copies anyway may come as one
        d_a = np.zeros(1, np.float32)
        REV(2.0, values, y, out, d_a=d_a, d_x=np.zeros(N, np.float32),
            d_out=_CopyingArray(np.ones(N, np.float32)), grid=N)
        assert d_a[0] == values.sum()


class _Unconvertible:
    """An array-like whose conversion fails (a PyTorch tensor that requires grad, say)."""

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("Can't call numpy() on Tensor that requires grad")


def test_an_array_like_whose_conversion_fails_is_an_argument_error():
    # was: the RuntimeError of its __array__ escaped, naming no parameter
    y = np.ones(N, np.float32)
    for _ in range(2):
        with pytest.raises(ArgumentError, match="parameter 'x': np.asarray of this _Unconvertible failed"):
            saxpy(2.0, _Unconvertible(), y, np.zeros(N, np.float32), grid=N)


def test_parameters_named_like_the_launchers_keywords_are_explained():
    @ado.kernel
    def shift(device: ado.In[ado.f32], grid: ado.Out[ado.f32]):
        i = ado.tid()
        grid[i] = device[i] + 1.0

    x = np.arange(N, dtype=np.float32)
    out = np.zeros(N, np.float32)
    shift(x, out, grid=N)
    np.testing.assert_array_equal(out, x + 1)
    # was: "missing argument(s): device, grid", as if the call had not given them
    with pytest.raises(ArgumentError, match="launcher's own keywords .* pass those parameters by position"):
        shift(device=x, grid=out)


@pytest.mark.parametrize("mode", [ado.vjp, ado.jvp])
@pytest.mark.parametrize("wrt", [None, 3])
def test_a_wrt_that_names_nothing_is_an_argument_error(mode, wrt):
    # was: TypeError ('NoneType' / 'int' object is not iterable) from ado.vjp, and from ado.jvp for an int
    with pytest.raises(ArgumentError, match="needs the names|wrt names the parameters"):
        mode(saxpy, wrt=wrt)


@pytest.mark.parametrize("width", [2.0, "2", True])
def test_a_width_that_is_not_an_int_is_an_argument_error(width):
    # was: TypeError from the derivation (2.0, '2'), or True taken as width 1
    with pytest.raises(ArgumentError, match="width= is the number of tangents"):
        ado.jvp(saxpy, wrt=["x"], width=width)
    assert ado.jvp(saxpy, wrt=["x"], width=np.int64(2)).width == 2


def test_dir_of_the_package_lists_its_lazy_names():
    # was: TypeError (set | dict) from __dir__, so dir(ado) and tab completion failed
    names = dir(ado)
    assert {"kernel", "vjp", "jvp", "enzyme", "runtime"} <= set(names)


def test_a_host_device_array_is_read_and_written_in_place():
    # was: np.asarray made a 0-d object array of it ("expected dtype float32, got object"); through
    # np.from_dlpack numpy imports it read-only, and the refusal became a SystemError when the
    # import's ctypes deleter ran with that exception set
    from adoffload.runtime.dlpack import DeviceArray
    values, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    for _ in range(3):
        x, out = DeviceArray.from_numpy(values), DeviceArray.empty(N, np.float32)
        saxpy(2.0, x, y, out, grid=N)
        np.testing.assert_array_equal(out.to_numpy(), 2 * values + 1)
        d_x = DeviceArray.from_numpy(np.zeros(N, np.float32))
        REV(2.0, x, y, out, d_a=np.zeros(1, np.float32), d_x=d_x, d_out=np.ones(N, np.float32), grid=N)
        np.testing.assert_array_equal(d_x.to_numpy(), np.full(N, 2, np.float32))
        with pytest.raises(ArgumentError, match="'x' and 'out' share memory"):
            saxpy(2.0, out, y, out, grid=N)
    freed = DeviceArray.from_numpy(values)
    freed.device.free(freed.buffer)
    with pytest.raises(ArgumentError, match="parameter 'x': the DeviceArray was freed"):
        saxpy(2.0, freed, y, np.zeros(N, np.float32), grid=N)
