"""Status records of asynchronous GPU launches, in pinned host memory the GPU writes directly.

A launch that need not wait for its kernel (kernels/launch_run.py: every array already on the
device and ordered with the default stream) gets the next record of a ring of ``count`` records
(language/status.py: four i64 words each) in page-locked host memory mapped into the device's
address space. The kernel writes a record only when a thread fails (bounds, assert, integer
fault); nothing clears or copies it per launch: the ring starts zeroed, and once all its records
are used (or an error shows) ``settle`` waits for the device, reports the earliest failed launch
and zeroes the ring in one ``memset``.

When an error is reported: ``check()`` (one read of the ring's bytes) runs before every launch on
the device and after its synchronous copies to the host and ``synchronize()``; once a record is
set it waits for the device (a record is read only after its kernel has finished: the failing
thread writes its words one after another) and raises the earliest launch's error through the
``report`` that launch gave ``take``, which says it comes from an earlier launch. At exit, errors
not yet reported are printed to stderr. ``ADOFFLOAD_SYNC_LAUNCH=1`` makes every launch wait and
report its own error (launch_run.py).
"""
from __future__ import annotations

import atexit
import ctypes
import sys
import threading
import weakref

from ..language.status import WORDS

RECORD_BYTES = 8 * WORDS
DEFAULT_COUNT = 128


class StatusRing:
    """``count`` records at ``host_address`` (device address ``device_address``); ``synchronize``
    waits for every launch made with one of them (the device's synchronize)."""

    def __init__(self, host_address: int, device_address: int, count: int, synchronize):
        self.host, self.device_address, self.count = host_address, device_address, count
        self.nbytes = count * RECORD_BYTES
        self.zero = bytes(self.nbytes)
        self.words = (ctypes.c_int64 * (count * WORDS)).from_address(host_address)
        ctypes.memset(host_address, 0, self.nbytes)
        self.reports: list = [None] * count
        self.next = 0
        self.lock = threading.RLock()         # held from take() until the launch is queued
        self._synchronize = synchronize
        self.closed = False
        atexit.register(_report_at_exit, weakref.ref(self))

    def take(self, report) -> int:
        """The device address of a zeroed record for the next launch (call with ``lock`` held);
        ``report(record)`` raises that launch's error once its record is found set."""
        k = self.next
        if k == self.count:
            self.settle()
            k = 0
        self.next = k + 1
        self.reports[k] = report
        return self.device_address + k * RECORD_BYTES

    def is_set(self) -> bool:
        """Whether any launch's record has been written (a failed thread), finished or not."""
        return ctypes.string_at(self.host, self.nbytes) != self.zero

    def check(self) -> None:
        """Raise the earliest failed launch's error, if a record is set (waits for the device then)."""
        if self.next and ctypes.string_at(self.host, self.nbytes) != self.zero:
            self.settle()

    def settle(self) -> None:
        """Wait for the device, zero the ring and raise the earliest failed launch's error, if any."""
        with self.lock:
            used = self.next
            if not used:
                return
            self._synchronize()
            records = [tuple(self.words[k * WORDS:(k + 1) * WORDS]) for k in range(used)]
            failed = [k for k, record in enumerate(records) if record[0]]
            reports = self.reports[:used]
            ctypes.memset(self.host, 0, self.nbytes)
            self.reports = [None] * self.count
            self.next = 0
        if failed:
            first = failed[0]
            reports[first](records[first], len(failed) - 1)

    def pending_errors(self) -> list[str]:
        """The messages of failed launches not yet reported, after waiting for the device (exit)."""
        messages = []
        with self.lock:
            used, self.next = self.next, 0
            if not used:
                return messages
            self._synchronize()
            for k in range(used):
                record = tuple(self.words[k * WORDS:(k + 1) * WORDS])
                if record[0]:
                    try:
                        self.reports[k](record, 0)
                    except Exception as exc:   # noqa: BLE001 - each report raises its launch's error
                        messages.append(f"{type(exc).__name__}: {exc}")
            ctypes.memset(self.host, 0, self.nbytes)
            self.reports = [None] * self.count
        return messages


def _report_at_exit(ring_ref) -> None:
    ring = ring_ref()
    if ring is None or ring.closed:
        return
    try:
        messages = ring.pending_errors()
    except Exception as exc:  # noqa: BLE001 - a faulted device at exit: say so, never hang or crash
        messages = [f"the device could not be synchronized at exit ({type(exc).__name__}: {exc})"]
    for message in messages:
        print(f"adoffload: an asynchronous GPU launch failed and was not reported before exit: {message}",
              file=sys.stderr)
