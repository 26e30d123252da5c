"""A kernel's chain of native launch entries (kernels/native_entry.py): a script alternating up to
``MAX_CHAIN`` (4) signatures launches each natively, every entry handing a launch it does not match to
the next and the last to the Python path. These tests alternate 2, 3 and 4 signatures (shapes, grids,
a scalar's type, tuple grids, a vjp kernel) and read the entries' counters: after warm-up every launch
ran natively and none reached the Python path, with the numbers the Python path gives
(``ADOFFLOAD_NATIVE_LAUNCH=0``). A fifth signature takes the Python path, correct, evicting nothing;
bad inputs in an alternating loop raise the Python path's own errors whichever entry saw them first;
a re-made plan's entry takes its predecessor's place; threads launching while the chain is re-linked
get their own results."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import ArgumentError, BoundsError
from adoffload.kernels.native_entry import MAX_CHAIN, NATIVE_ENV, chain_of, entry_of, totals
from adoffload.kernels.native_layout import LAYOUT

pytestmark = pytest.mark.skipif(LAYOUT is None, reason="no native entries on this Python/numpy")
ROUNDS = 6


def fresh_saxpy():
    """A kernel of its own per test: its chain starts empty."""
    @ado.kernel
    def saxpy(a: ado.f32, x: ado.In[ado.f32], y: ado.In[ado.f32], out: ado.Out[ado.f32]):
        i = ado.tid()
        out[i] = a * x[i] + y[i]
    return saxpy


# signatures of saxpy: array size, grid, the type of the scalar
SIGNATURES = [(16, 16, float), (32, 32, float), (16, 8, float), (16, 16, np.float32), (24, 24, float)]


def saxpy_call(signature, rng):
    size, grid, scalar = signature
    x, y = rng.standard_normal(size).astype(np.float32), rng.standard_normal(size).astype(np.float32)
    return [scalar(rng.standard_normal()), x, y, np.full(size, 7.0, np.float32)], {"grid": grid}


def vjp_call(signature, rng):
    args, kwargs = saxpy_call(signature, rng)
    size = args[1].size
    kwargs.update(d_a=np.zeros(1, np.float32), d_x=np.zeros(size, np.float32),
                  d_out=rng.standard_normal(size).astype(np.float32))
    return args, kwargs


def outputs(args, kwargs) -> list:
    return [np.copy(v) for v in (*args, *kwargs.values()) if isinstance(v, np.ndarray)]


def copied(args, kwargs):
    return ([np.copy(a) if isinstance(a, np.ndarray) else a for a in args],
            {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()})


def python_path(monkeypatch, kernel, args, kwargs):
    """What the Python path gives for a launch (``args``, ``kwargs``: copies of its arrays as they were
    before it; shadows accumulate)."""
    monkeypatch.setenv(NATIVE_ENV, "0")
    try:
        kernel(*args, **kwargs)
    finally:
        monkeypatch.delenv(NATIVE_ENV)
    return outputs(args, kwargs)


def warm(kernel, make, signatures, rng) -> None:
    for _ in range(2):              # a signature's second launch makes its entry
        for s in signatures:
            args, kwargs = make(s, rng)
            kernel(*args, **kwargs)


def check_alternating(monkeypatch, kernel, make, signatures, seed=0):
    """Alternate ``signatures`` after warm-up: every launch native, none handed to the Python path, each
    entry passed as often as the chain's order says, the Python path's numbers."""
    rng = np.random.default_rng(seed)
    warm(kernel, make, signatures, rng)
    chain = chain_of(kernel)
    assert len(chain) == len(signatures), [kernel._launch_plans[k].native_why_not for k in kernel._launch_plans]
    assert entry_of(kernel) is chain[0]
    before = [(e.launches, e.fallbacks, e.passed_on) for e in chain]
    calls = []
    start = totals()
    for _ in range(ROUNDS):
        for s in signatures:
            args, kwargs = make(s, rng)
            given = copied(args, kwargs)
            kernel(*args, **kwargs)
            if "d_out" in kwargs:
                np.testing.assert_array_equal(kwargs["d_out"], given[1]["d_out"])    # the caller's seed is kept
            calls.append((*given, outputs(args, kwargs)))
    end = totals()
    n = len(signatures)
    assert end[0] - start[0] == ROUNDS * n, "not every launch ran natively"
    assert end[1] == start[1], "a launch reached the Python path"
    for entry, (launches, fallbacks, passed) in zip(chain, before):
        assert entry.launches - launches == ROUNDS
        assert entry.fallbacks - fallbacks == entry.passed_on - passed      # all passed on, none to Python
    # the k-th entry of the chain is passed by the launches of the n - 1 - k entries after it
    assert [e.passed_on - b[2] for e, b in zip(chain, before)] == [ROUNDS * (n - 1 - k) for k in range(n)]
    assert chain[-1].passed_on == before[-1][2]
    for args, kwargs, got in calls:
        for u, v in zip(got, python_path(monkeypatch, kernel, args, kwargs)):
            np.testing.assert_array_equal(u, v)
    return chain


@pytest.mark.parametrize("count", [2, 3, 4])
def test_alternating_signatures_all_run_natively(monkeypatch, count):
    check_alternating(monkeypatch, fresh_saxpy(), saxpy_call, SIGNATURES[:count])


@pytest.mark.parametrize("count", [2, 3])
def test_alternating_signatures_of_a_vjp_kernel_run_natively(monkeypatch, count):
    check_alternating(monkeypatch, ado.vjp(fresh_saxpy(), ["a", "x"]), vjp_call, SIGNATURES[:count])


def test_alternating_tuple_grids_and_a_device_object(monkeypatch):
    @ado.kernel
    def add2(x: ado.In[ado.f64, 2], out: ado.Out[ado.f64, 2]):
        i, j = ado.tid()
        out[i, j] = x[i, j] + ado.f64(j)
    device = ado.runtime.get_device("cpu")

    def make(signature, rng):
        rows, grid, on = signature
        kwargs = {"grid": grid} if on is None else {"grid": grid, "device": on}
        return [rng.standard_normal((rows, 5)), np.full((rows, 5), 3.0)], kwargs
    check_alternating(monkeypatch, add2, make, [(4, (4, 5), None), (4, (2, 5), None), (6, (6, 5), device),
                                                (6, (6, 5), "cpu")])


def test_the_chain_is_most_recently_made_first():
    kernel = fresh_saxpy()
    rng = np.random.default_rng(1)
    made = []
    for s in SIGNATURES[:MAX_CHAIN]:
        warm(kernel, saxpy_call, [s], rng)
        made.append(entry_of(kernel))
        assert chain_of(kernel) == tuple(reversed(made))
    assert [e.next for e in made[1:]] == made[:-1] and made[0].next is None


def test_a_fifth_signature_takes_the_python_path_and_evicts_nothing(monkeypatch):
    kernel = fresh_saxpy()
    four = check_alternating(monkeypatch, kernel, saxpy_call, SIGNATURES[:4])
    rng = np.random.default_rng(2)
    warm(kernel, saxpy_call, [SIGNATURES[4]], rng)
    fifth = kernel._last_plan
    assert fifth.native is None and "chain is full" in fifth.native_why_not
    assert chain_of(kernel) == four
    start, calls = totals(), []
    for _ in range(ROUNDS):
        for s in SIGNATURES:
            args, kwargs = saxpy_call(s, rng)
            given = copied(args, kwargs)
            kernel(*args, **kwargs)
            calls.append((*given, outputs(args, kwargs)))
    end = totals()
    assert end[0] - start[0] == ROUNDS * 4 and end[1] - start[1] == ROUNDS     # the four stay native
    assert four[-1].last_reason == "grid"                        # the fifth went through all four
    for args, kwargs, got in calls:
        for u, v in zip(got, python_path(monkeypatch, kernel, args, kwargs)):
            np.testing.assert_array_equal(u, v)


def _short(c):
    c["args"][1] = c["args"][1][:c["kwargs"]["grid"] - 1]


def _wrong_dtype(c):
    c["args"][2] = c["args"][2].astype(np.float64)


def _overlap(c):
    c["args"][3] = c["args"][1]


def _out_keyword(c):
    c["kwargs"]["out"] = c["args"].pop()


BAD = [("short", _short, BoundsError), ("dtype", _wrong_dtype, ArgumentError), ("overlap", _overlap, ArgumentError),
       ("unknown keyword", lambda c: c["kwargs"].update(z=1), ArgumentError),
       ("keyword and positional", lambda c: (_out_keyword(c), c["args"].append(c["kwargs"]["out"])), TypeError)]


@pytest.mark.parametrize("name,change,error", BAD, ids=[b[0] for b in BAD])
def test_bad_inputs_in_an_alternating_loop_raise_the_python_paths_errors(monkeypatch, name, change, error):
    kernel = fresh_saxpy()
    signatures = SIGNATURES[:4]
    rng = np.random.default_rng(3)
    warm(kernel, saxpy_call, signatures, rng)
    chain = chain_of(kernel)
    assert len(chain) == 4
    for k in range(3):
        for s in signatures:                     # the bad variant of each signature, between good launches
            args, kwargs = saxpy_call(s, rng)
            before = totals()
            kernel(*args, **kwargs)
            assert totals()[0] == before[0] + 1 and totals()[1] == before[1]
            c = {"args": list(args), "kwargs": dict(kwargs)}
            change(c)
            messages = []
            for native in (True, False):
                if not native:
                    monkeypatch.setenv(NATIVE_ENV, "0")
                before = totals()
                try:
                    with pytest.raises(error) as info:
                        kernel(*c["args"], **c["kwargs"])
                finally:
                    monkeypatch.delenv(NATIVE_ENV, raising=False)
                messages.append(str(info.value))
                if native:          # the chain handed it to the Python path, once
                    assert totals() == (before[0], before[1] + 1)
            assert messages[0] == messages[1]
    assert chain_of(kernel) == chain


def test_switched_off_the_head_hands_straight_to_the_python_path(monkeypatch):
    kernel = fresh_saxpy()
    chain = check_alternating(monkeypatch, kernel, saxpy_call, SIGNATURES[:3])
    passed = [e.passed_on for e in chain]
    launches = [e.launches for e in chain]
    monkeypatch.setenv(NATIVE_ENV, "0")
    rng = np.random.default_rng(4)
    start = totals()
    for s in SIGNATURES[:3]:
        args, kwargs = saxpy_call(s, rng)
        kernel(*args, **kwargs)
    assert totals() == (start[0], start[1] + 3)
    assert [e.passed_on for e in chain] == passed and [e.launches for e in chain] == launches
    assert chain[0].last_reason == "switched off"


def test_a_re_made_plan_takes_its_predecessors_place():
    kernel = fresh_saxpy()
    rng = np.random.default_rng(5)
    warm(kernel, saxpy_call, SIGNATURES[:2], rng)
    old = chain_of(kernel)
    for _ in range(2):
        # a value the f32 slot cannot hold: the entries hand it on, the Python path re-makes the plan,
        # and at its second launch (the second such call) the re-made plan's entry is made
        args, kwargs = saxpy_call(SIGNATURES[0], rng)
        args[0] = 1e39
        with pytest.warns(RuntimeWarning):
            kernel(*args, **kwargs)
    new = chain_of(kernel)
    assert len(new) == 2 and new[0] is old[0] and new[1] is not old[1] and new[1].key == old[1].key
    assert new[0].next is new[1] and new[1].next is None
    start = totals()
    for s in SIGNATURES[:2]:
        args, kwargs = saxpy_call(s, rng)
        kernel(*args, **kwargs)
        np.testing.assert_array_equal(args[3], np.float32(args[0]) * args[1] + args[2])
    assert totals() == (start[0] + 2, start[1])


def test_threads_alternating_while_the_chain_is_re_linked():
    kernel = fresh_saxpy()
    rng = np.random.default_rng(6)
    warm(kernel, saxpy_call, SIGNATURES[:2], rng)
    errors, stop = [], threading.Event()

    def work(k):
        local = np.random.default_rng(k)
        try:
            while not stop.is_set():
                for s in SIGNATURES[:4]:
                    args, kwargs = saxpy_call(s, local)
                    kernel(*args, **kwargs)
                    grid = kwargs["grid"]
                    want = np.full(args[1].size, 0.0, np.float32)
                    want[:grid] = np.float32(args[0]) * args[1][:grid] + args[2][:grid]
                    np.testing.assert_array_equal(args[3], want)
        except Exception as exc:       # reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    warm(kernel, saxpy_call, SIGNATURES[2:4], rng)     # new entries linked while the threads launch
    for _ in range(50):
        warm(kernel, saxpy_call, SIGNATURES[:4], rng)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(chain_of(kernel)) == 4
