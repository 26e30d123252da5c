"""Native launch entries (kernels/native_entry.py, native_ir.py): the second launch of a host signature
makes machine code that checks exactly that signature and launches; any other launch takes the Python
path, which still checks, converts or refuses it and words the errors. These tests see the entry run
(its counters), fall back for each of its reasons with the Python path's outcome, give the numbers the
Python path gives (``ADOFFLOAD_NATIVE_LAUNCH=0``), raise the kernel's own errors, keep seeds, zero Out
arrays, and release the GIL where a launch may take long."""
from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import ArgumentError, BoundsError, KernelFaultError, ShapeError
from adoffload.kernels import native_entry
from adoffload.kernels.native_entry import NATIVE_ENV, entry_of, totals
from adoffload.kernels.native_layout import LAYOUT, measure_layout

pytestmark = pytest.mark.skipif(LAYOUT is None, reason="no native entries on this Python/numpy")
N = 16


@ado.kernel
def mixed(a: ado.f32, b: ado.f64, n: ado.i32, m: ado.i64, flag: ado.bool_, x: ado.In[ado.f32],
          y: ado.In[ado.f64], out: ado.Out[ado.f64]):
    i = ado.tid()
    extra = ado.f64(n) + ado.f64(m)
    if flag:
        extra = extra + 0.5
    out[i] = ado.f64(a * x[i]) + b * y[i] + extra


@ado.kernel
def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
    i = ado.tid()
    out[i] = a * x[i] + y[i]


def mixed_args(rng=None):
    rng = rng or np.random.default_rng(0)
    return [1.5, 2.25, 3, -7, True, rng.standard_normal(N).astype(np.float32), rng.standard_normal(N), np.zeros(N)]


def warmed(kernel, *args, **kwargs):
    """Launch twice (the second launch of a signature makes its entry, if it has none yet); the entry."""
    kernel(*args, **kwargs)
    kernel(*args, **kwargs)
    entry = entry_of(kernel)
    assert entry is not None, kernel._last_plan.native_why_not
    return entry


def test_the_layout_is_what_numpy_reports():
    assert measure_layout() == LAYOUT
    a = np.zeros((3, 5), np.float32)[1:]
    read = ctypes.c_void_p.from_address
    assert read(id(a) + LAYOUT.data).value == a.ctypes.data
    assert read(id(a) + LAYOUT.descr).value == id(a.dtype)
    assert ctypes.c_int32.from_address(id(a) + LAYOUT.nd).value == 2
    assert tuple((ctypes.c_int64 * 2).from_address(read(id(a) + LAYOUT.dimensions).value)) == (2, 5)
    assert ctypes.c_int32.from_address(id(a) + LAYOUT.flags).value == a.flags.num


def test_the_second_launch_makes_the_entry_and_later_ones_run_it():
    @ado.kernel
    def twice(x: ado.In[ado.f32], out: ado.Out[ado.f32]):
        i = ado.tid()
        out[i] = 2.0 * x[i]
    x, out = np.arange(N, dtype=np.float32), np.zeros(N, np.float32)
    twice(x, out, grid=N)
    assert entry_of(twice) is None
    twice(x, out, grid=N)
    entry = entry_of(twice)
    assert entry is not None and entry.launches == 0
    before = totals()
    for k in range(5):
        out[:] = 0
        twice(x + k, out, grid=N)
        np.testing.assert_array_equal(out, 2.0 * (x + k))
    assert entry.launches == 5 and entry.fallbacks == 0
    assert totals()[0] - before[0] == 5


def test_every_scalar_kind_and_keywords_are_packed_as_the_python_path_packs_them(monkeypatch):
    args = mixed_args()
    entry = warmed(mixed, *args[:5], x=args[5], y=args[6], out=args[7], grid=N)
    got = np.zeros(N)
    for a, b, n, m, flag in [(1.5, 2.25, 3, -7, True), (-0.1, 1e300, -2**31, 2**63 - 1, False), (3e38, -0.0, 2**31 - 1,
                             -2**63, True), (float("nan"), float("inf"), 0, 0, False)]:
        launches = entry.launches
        with np.errstate(all="ignore"):
            mixed(a, b, n, m, flag, x=args[5], y=args[6], out=got, grid=N)
        assert entry.launches == launches + 1, entry.last_reason
        want = np.zeros(N)
        monkeypatch.setenv(NATIVE_ENV, "0")
        with np.errstate(all="ignore"):
            mixed(a, b, n, m, flag, x=args[5], y=args[6], out=want, grid=N)
        monkeypatch.delenv(NATIVE_ENV)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("launcher", ["primal", "jvp", "vjp"])
def test_the_native_and_python_paths_give_identical_results(monkeypatch, launcher):
    kernel = {"primal": saxpy, "jvp": ado.jvp(saxpy, ["a", "x"]), "vjp": ado.vjp(saxpy, ["a", "x"])}[launcher]

    def run(seed):
        rng = np.random.default_rng(seed)
        x, y = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
        out = np.full(N, 9.0, np.float32)
        shadows = {}
        if launcher == "jvp":
            shadows = dict(d_a=0.75, d_x=rng.standard_normal(N).astype(np.float32), d_out=np.zeros(N, np.float32))
        elif launcher == "vjp":
            shadows = dict(d_a=np.zeros(1, np.float32), d_x=np.ones(N, np.float32),
                           d_out=rng.standard_normal(N).astype(np.float32))
        seed_before = shadows["d_out"].copy() if launcher == "vjp" else None
        kernel(1.25, x, y, out, **shadows, grid=N)
        if seed_before is not None:
            np.testing.assert_array_equal(shadows["d_out"], seed_before)     # the caller's seed is kept
        return [out] + [v for v in shadows.values() if isinstance(v, np.ndarray)]
    run(0), run(0)
    entry = entry_of(kernel)
    assert entry is not None
    native = [run(s) for s in range(1, 4)]
    assert entry.launches == 3
    monkeypatch.setenv(NATIVE_ENV, "0")
    python = [run(s) for s in range(1, 4)]
    assert entry.launches == 3 and entry.last_reason == "switched off"
    for a, b in zip(native, python):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


def test_switched_off_no_entry_is_made(monkeypatch):
    @ado.kernel
    def copy(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = x[i]
    monkeypatch.setenv(NATIVE_ENV, "0")
    x, out = np.arange(4.0), np.zeros(4)
    for _ in range(3):
        copy(x, out, grid=4)
    assert entry_of(copy) is None and not copy._last_plan.native_tried
    monkeypatch.setenv(NATIVE_ENV, "1")
    copy(x, out, grid=4)                      # any other value: on
    assert entry_of(copy) is not None


class Sub(np.ndarray):
    pass


def _frozen(array):
    array = array.copy()
    array.flags.writeable = False
    return array


# (reason, how the good call (a, x, y, out, grid) is changed, the Python path's outcome: an error type or None)
FALLBACKS = [
    ("arguments", lambda c: c.update(extra=(np.ones(N, np.float32),)), TypeError),
    ("arguments", lambda c: c.update(kw={**dict(zip("xy", c["args"][1:3])), "out": c["args"][3], **c["kw"]},
                                     args=c["args"][:1]), None),                 # by keyword
    ("arguments", lambda c: c["kw"].update(z=1), ArgumentError),
    ("grid", lambda c: c["kw"].update(grid=8), None),
    ("grid", lambda c: c["kw"].update(grid=np.int64(N)), None),
    ("grid", lambda c: c["kw"].update(grid=(N,)), None),
    ("grid", lambda c: c["kw"].update(grid=True), ado.GridError),
    ("device", lambda c: c["kw"].update(device="host"), None),
    ("device", lambda c: c["kw"].update(device=ado.runtime.get_device("cpu")), None),
    ("array type", lambda c: c["args"].__setitem__(1, c["args"][1].view(Sub)), None),
    ("array type", lambda c: c["args"].__setitem__(1, list(c["args"][1])), ArgumentError),
    ("dtype", lambda c: c["args"].__setitem__(1, c["args"][1].astype(np.float64)), ArgumentError),
    ("dtype", lambda c: c["args"].__setitem__(1, c["args"][1].astype(">f4")), ArgumentError),
    ("shape", lambda c: c["args"].__setitem__(1, c["args"][1][:N - 1]), BoundsError),
    ("shape", lambda c: c["args"].__setitem__(1, c["args"][1].reshape(4, 4)), ArgumentError),
    ("flags", lambda c: c["args"].__setitem__(1, np.repeat(c["args"][1], 2)[::2]), ArgumentError),
    ("flags", lambda c: c["args"].__setitem__(3, _frozen(c["args"][3])), ArgumentError),
    ("flags", lambda c: c["args"].__setitem__(1, _frozen(c["args"][1])), None),    # a read-only input is fine
    ("scalar type", lambda c: c["args"].__setitem__(0, np.float32(2.0)), None),
    ("scalar type", lambda c: c["args"].__setitem__(0, 2), None),
    ("scalar type", lambda c: c["args"].__setitem__(0, True), ArgumentError),
    ("scalar value", lambda c: c["args"].__setitem__(0, 1e39), RuntimeWarning),   # rounds to inf, warning
    ("overlap", lambda c: c["args"].__setitem__(3, c["args"][1]), ArgumentError),
    ("switched off", lambda c: c.update(env="0"), None),
]


@pytest.mark.parametrize("reason,change,outcome", FALLBACKS,
                         ids=[f"{r}-{k}" for k, (r, _, _) in enumerate(FALLBACKS)])
def test_each_fallback_takes_the_python_path_with_its_outcome(monkeypatch, reason, change, outcome):
    x, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    entry = warmed(saxpy, 2.0, x, y, np.zeros(N, np.float32), grid=N)

    def call(native: bool):
        c = {"args": [2.0, x.copy(), y.copy(), np.full(N, 5.0, np.float32)], "kw": {"grid": N}, "extra": ()}
        change(c)
        if "env" in c or not native:
            monkeypatch.setenv(NATIVE_ENV, "0" if not native else c["env"])
        fallbacks = entry.fallbacks
        try:
            if outcome is RuntimeWarning:
                with pytest.warns(RuntimeWarning):
                    saxpy(*c["args"], *c["extra"], **c["kw"])
            elif outcome is None:
                saxpy(*c["args"], *c["extra"], **c["kw"])
            else:
                with pytest.raises(outcome) as info:
                    saxpy(*c["args"], *c["extra"], **c["kw"])
                return str(info.value), fallbacks
        finally:
            monkeypatch.delenv(NATIVE_ENV, raising=False)
        out = c["args"][3] if len(c["args"]) > 3 else c["kw"].get("out")
        return np.copy(out), fallbacks
    got, fallbacks = call(native=True)
    assert entry.fallbacks == fallbacks + 1 and entry.last_reason == reason
    want, _ = call(native=False)
    if isinstance(got, str):
        assert got == want                              # the same message: the Python path wrote both
    else:
        np.testing.assert_array_equal(got, want)
    saxpy(2.0, x, y, np.zeros(N, np.float32), grid=N)
    before = totals()[0]          # (a scalar the slot cannot hold may have re-made the plan, and its entry)
    saxpy(2.0, x, y, np.zeros(N, np.float32), grid=N)   # and a good launch runs natively again
    assert totals()[0] == before + 1


def test_a_missing_grid_falls_back_to_the_grid_error():
    x = np.ones(N, np.float32)
    entry = warmed(saxpy, 2.0, x, x, np.zeros(N, np.float32), grid=N)
    with pytest.raises(ado.GridError, match="needs grid="):
        saxpy(2.0, x, x, np.zeros(N, np.float32))
    assert entry.last_reason == "grid"
    with pytest.raises(ado.GridError, match="needs grid="):
        saxpy(2.0, x, x, np.zeros(N, np.float32), device="cpu")
    assert entry.last_reason == "grid"


def test_tuple_grids_and_a_device_object():
    @ado.kernel
    def add2(x: ado.In[ado.f64, 2], out: ado.Out[ado.f64, 2]):
        i, j = ado.tid()
        out[i, j] = x[i, j] + ado.f64(j)
    device = ado.runtime.get_device("cpu")
    x, out = np.arange(20.0).reshape(4, 5), np.zeros((4, 5))
    entry = warmed(add2, x, out, grid=(4, 5), device=device)
    out[:] = 0
    add2(x * 2, out, grid=(4, 5), device=device)
    assert entry.launches == 1
    np.testing.assert_array_equal(out, x * 2 + np.arange(5.0))
    add2(x, out, grid=[4, 5], device=device)
    assert entry.last_reason == "grid"
    add2(x, out, grid=(4, 5))                      # the default "cpu" is not the object the plan saw
    assert entry_of(add2).last_reason in (None, "device")


def test_kernel_errors_are_the_python_paths_errors(monkeypatch):
    @ado.kernel
    def shifted(x: ado.In[ado.f64], k: ado.In[ado.i64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = x[k[i]] / ado.f64(1 // k[0])
    x, k, out = np.arange(8.0), np.ones(8, np.int64), np.zeros(8)
    entry = warmed(shifted, x, k, out, grid=8)
    messages = []
    for native in (True, False):
        if not native:
            monkeypatch.setenv(NATIVE_ENV, "0")
        launches = entry.launches
        bad = k.copy()
        bad[5] = 8
        with pytest.raises(BoundsError) as bounds:
            shifted(x, bad, out, grid=8)
        zero = k.copy()
        zero[0] = 0
        with pytest.raises(KernelFaultError) as division:
            shifted(x, zero, out, grid=8)
        messages.append((str(bounds.value), str(division.value)))
        assert entry.launches == launches + (2 if native else 0)
    assert messages[0] == messages[1]
    assert "index 8 is out of bounds for axis 0 of array 'x' with shape (8,)" in messages[0][0]
    monkeypatch.delenv(NATIVE_ENV)
    shifted(x, k, out, grid=8)
    np.testing.assert_array_equal(out, x[1])


def test_out_arrays_the_grid_does_not_cover_start_at_zero():
    @ado.kernel
    def half(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        if i % 2 == 0:
            out[i] = x[i]
    x = np.arange(8.0) + 1
    entry = warmed(half, x, np.zeros(8), grid=8)
    out = np.full(8, 7.0)
    half(x, out, grid=8)
    assert entry.launches == 1
    np.testing.assert_array_equal(out, np.where(np.arange(8) % 2 == 0, x, 0.0))


def test_a_large_seed_is_copied_on_the_heap_and_the_callers_is_kept():
    gradient = ado.vjp(saxpy, ["a", "x"])
    big = 2048                                     # 8 KiB seed: past the entry's stack area
    x, y, out = np.ones(big, np.float32), np.ones(big, np.float32), np.zeros(big, np.float32)
    seed = np.arange(big, dtype=np.float32)
    d_a, d_x = np.zeros(1, np.float32), np.zeros(big, np.float32)
    entry = warmed(gradient, 3.0, x, y, out, d_a=d_a, d_x=d_x, d_out=seed, grid=N)
    assert "call ptr @PyMem_RawMalloc" in entry.text
    d_a[:], d_x[:] = 0, 0
    gradient(3.0, x, y, out, d_a=d_a, d_x=d_x, d_out=seed, grid=N)
    assert entry.launches == 1
    np.testing.assert_array_equal(seed, np.arange(big, dtype=np.float32))
    np.testing.assert_array_equal(d_x[:N], 3.0 * seed[:N])
    assert d_a[0] == np.sum(seed[:N])


def test_threads_launching_one_entry_get_their_own_results():
    x = np.ones(N, np.float32)
    entry = warmed(saxpy, 2.0, x, x, np.zeros(N, np.float32), grid=N)
    errors, launches = [], entry.launches

    def work(k):
        try:
            for j in range(200):
                y, out = np.full(N, float(k * 1000 + j), np.float32), np.zeros(N, np.float32)
                saxpy(2.0, x, y, out, grid=N)
                assert (out == y + 2.0).all()
        except Exception as exc:       # reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert entry.launches == launches + 800


@ado.kernel
def spin(steps: ado.i64, out: ado.Out[ado.f64]):
    i = ado.tid()
    s = 0.0
    for k in range(steps):
        s = s * 0.999999 + ado.f64(k % 7)
    out[i] = s


def test_a_launch_that_may_take_long_releases_the_gil():
    out = np.zeros(1)
    entry = warmed(spin, 10, out, grid=1)
    assert "call ptr @PyEval_SaveThread()" in entry.text      # a loop: the GIL is released
    steps = 1000
    while True:                                                # about 0.3 s of kernel
        start = time.perf_counter()
        spin(steps, out, grid=1)
        if time.perf_counter() - start > 0.3 or steps > 10**10:
            break
        steps *= 4
    ticks, stop = [], threading.Event()

    def other():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)
    thread = threading.Thread(target=other)
    thread.start()
    time.sleep(0.02)
    launches = entry.launches
    start = time.perf_counter()
    spin(steps, out, grid=1)
    end = time.perf_counter()
    stop.set()
    thread.join()
    assert entry.launches == launches + 1
    during = [t for t in ticks if start + 0.05 < t < end - 0.05]
    assert len(during) > 10, f"another thread ran {len(during)} times during a {end - start:.2f} s launch"


def test_a_short_loop_free_launch_keeps_the_gil():
    x = np.ones(N, np.float32)
    entry = warmed(saxpy, 2.0, x, x, np.zeros(N, np.float32), grid=N)
    assert entry.loop_free and "call ptr @PyEval_SaveThread()" not in entry.text
    assert not entry_of(spin) or not entry_of(spin).loop_free


def test_shadow_shapes_are_checked_through_the_entry():
    gradient = ado.vjp(saxpy, ["a", "x"])
    x = np.ones(N, np.float32)
    good = dict(d_a=np.zeros(1, np.float32), d_x=np.zeros(N, np.float32), d_out=np.ones(N, np.float32))
    entry = warmed(gradient, 2.0, x, x, np.zeros(N, np.float32), **good, grid=N)
    for name, bad in (("d_x", np.zeros(N - 1, np.float32)), ("d_a", np.zeros(0, np.float32)),
                      ("d_out", np.ones(N + 1, np.float32))):
        with pytest.raises(ShapeError, match=f"'{name}'"):
            gradient(2.0, x, x, np.zeros(N, np.float32), **{**good, name: bad}, grid=N)
        assert entry.last_reason == "shape"


def test_only_host_plans_of_one_chunk_with_the_callers_arguments_get_an_entry():
    big = np.ones(1 << 12, np.float32)
    saxpy(1.0, big, big, np.zeros_like(big), grid=big.size)
    saxpy(1.0, big, big, np.zeros_like(big), grid=big.size)
    plan = saxpy._last_plan
    if ado.runtime.get_device("cpu").workers > 1:
        assert plan.native is None and plan.native_why_not == "the launch runs in several chunks"
    assert native_entry.why_not_native(plan) == plan.native_why_not


def test_an_entry_that_cannot_be_made_leaves_the_python_path_with_a_warning(monkeypatch):
    @ado.kernel
    def negate(x: ado.In[ado.f64], out: ado.Out[ado.f64]):
        i = ado.tid()
        out[i] = -x[i]

    def broken(entry, plan, variant):
        return "define void @broken( {"
    monkeypatch.setattr(native_entry, "entry_text", broken)
    x, out = np.arange(4.0), np.zeros(4)
    negate(x, out, grid=4)
    with pytest.warns(RuntimeWarning, match="making the native entry failed"):
        negate(x, out, grid=4)
    negate(-x, out, grid=4)
    np.testing.assert_array_equal(out, x)
    assert entry_of(negate) is None and "failed" in negate._last_plan.native_why_not


def test_numpy_scalars_get_entries_of_their_own(monkeypatch):
    args = mixed_args()
    scalars = [np.float32(1.5), np.float64(2.25), np.int32(3), np.int64(-7), np.bool_(True)]
    entry = warmed(mixed, *scalars, *args[5:], grid=N)
    for values in ([np.float32(-0.5), np.float64(1e300), np.int32(-2**31), np.int64(2**62), np.bool_(False)],
                   [np.float32(3e38), np.float64(-0.0), np.int32(7), np.int64(-1), np.bool_(True)]):
        launches = entry.launches
        got, want = np.zeros(N), np.zeros(N)
        mixed(*values, *args[5:7], got, grid=N)
        assert entry.launches == launches + 1, entry.last_reason
        monkeypatch.setenv(NATIVE_ENV, "0")
        mixed(*values, *args[5:7], want, grid=N)
        monkeypatch.delenv(NATIVE_ENV)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ArgumentError, match="does not fit in ado.i32"):
        mixed(np.float32(1), np.float64(1), np.int64(2**40), np.int64(0), np.bool_(True), *args[5:], grid=N)
    assert entry.last_reason == "scalar type"          # an np.int64 for the i32: another signature
    wide = [np.float32(1), np.float64(1), np.int64(5), np.int64(0), np.bool_(True)]
    entry = warmed(mixed, *wide, *args[5:], grid=N)
    with pytest.raises(ArgumentError, match="does not fit in ado.i32"):
        mixed(np.float32(1), np.float64(1), np.int64(2**40), np.int64(0), np.bool_(True), *args[5:], grid=N)
    assert entry.last_reason == "scalar value"         # its own signature, a value the i32 slot cannot hold
