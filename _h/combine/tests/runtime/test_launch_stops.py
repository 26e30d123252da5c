"""Host launches stop early: once the status record is set no new chunk starts, and Ctrl-C
(KeyboardInterrupt) interrupts a long launch between chunks (issue 14, item 7). Before, a
bounds error in grid=2**36 was reported only after every thread had run, and Ctrl-C was
ignored for minutes."""
from __future__ import annotations

import _thread
import signal
import threading
import time

import numpy as np
import pytest

import adoffload as ado


@ado.kernel
def write_index(out: ado.Out[ado.i64]):
    i = ado.tid()
    out[i] = i


@ado.kernel
def spin(n: ado.i64, out: ado.InOut[ado.f64]):
    i = ado.tid()
    acc = 0.0
    for k in range(n):
        acc += 1e-9 * float(k)
    if acc < 0.0:
        out[0] = acc


def test_bounds_error_in_a_huge_grid_stops_early():
    out = np.zeros(4, np.int64)
    write_index(out, grid=4)                           # compile first; time only the launch
    began = time.perf_counter()
    with pytest.raises(ado.BoundsError, match=r"index \d+ is out of bounds"):
        write_index(out, grid=2**36)                   # 6.9e10 threads: minutes if run to the end
    assert time.perf_counter() - began < 10
    assert out.tolist() == [0, 1, 2, 3]


def test_ctrl_c_interrupts_a_long_host_launch():
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        # e.g. pytest started in the background by a non-interactive shell (SIGINT ignored):
        # interrupt_main then does nothing, and the launch below would run for hours
        pytest.skip("SIGINT is not handled by Python's default handler in this process, so Ctrl-C "
                    "cannot be simulated")
    out = np.zeros(1)
    spin(1, out, grid=8)                               # compile first
    timer = threading.Timer(0.5, _thread.interrupt_main)
    began = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            spin(1000, out, grid=2**32)                # about 4e12 loop iterations: hours
    finally:
        timer.cancel()
    assert time.perf_counter() - began < 10
    spin(10, out, grid=16)                             # the device still works afterwards
