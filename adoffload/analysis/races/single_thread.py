"""Two accesses that one thread of the block at most can make: in its program order, never a race.

``if ado.thread_id() == 0:`` around a helper's derivative into shared arrays (docs/language.md) makes
every access of the gradient's reverse sweep thread 0's; the enumeration of offsets may not follow
the sweep's reversed counters, but it need not: the guards alone (``Proofs._holds``, with only the
thread's indices known, so a guard on anything else counts as holding) admit one thread.
"""
from __future__ import annotations

import itertools


def one_thread(proofs, a, b) -> bool:
    """Whether the guards of accesses ``a`` and ``b`` admit one thread of the block at most."""
    runners = set()
    for x in (a, b):
        if not hasattr(x, "_runners"):
            x._runners = []
            for thread in itertools.product(*map(range, proofs.forms.block)):
                if proofs._holds(x, {("t", axis): v for axis, v in enumerate(thread)}):
                    x._runners.append(thread)
                    if len(x._runners) > 1:
                        break
        runners.update(x._runners)
        if len(runners) > 1:
            return False
    return True
