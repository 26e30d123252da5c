"""The result of a batch of problems: scipy's ``OptimizeResult`` with one entry per problem."""
from __future__ import annotations

import numpy as np

from .inputs import is_jax, is_traced
from .status import messages


class Deferred:
    """A result field made on first access, once (``fetch``): on a GPU the numpy path leaves the large
    per-problem arrays (residuals, gradients) on the device until they are read, so a script that
    reads only ``x`` and ``success`` does not wait for the rest to cross the bus."""
    __slots__ = ("_make", "_value", "_done")

    def __init__(self, make):
        self._make, self._value, self._done = make, None, False

    def fetch(self):
        if not self._done:
            self._value, self._done, self._make = self._make(), True, None
        return self._value


class OptimizeResult(dict):
    """A dict with attribute access (as scipy's), every entry an array over the problems: ``x``
    ``(batch, n)``, ``success``, ``status`` (status.py), ``message``, ``nit``, ``nfev``; ``minimize``
    adds ``fun`` and ``jac``, ``least_squares`` adds ``cost``, ``fun`` (the residuals), ``grad``
    (``J^T r``), ``optimality`` (``max |grad|``) and ``njev``. A ``Deferred`` entry becomes its array on
    first access (item, attribute, ``get``, ``values``, ``items``, ``copy``, pickling)."""

    def __getitem__(self, name):
        value = dict.__getitem__(self, name)
        if isinstance(value, Deferred):
            value = value.fetch()
            dict.__setitem__(self, name, value)
        return value

    def get(self, name, default=None):
        return self[name] if name in self else default

    def values(self):
        return [self[k] for k in self]

    def items(self):
        return [(k, self[k]) for k in self]

    def copy(self) -> "OptimizeResult":
        return OptimizeResult(self.items())

    def __reduce__(self):
        return OptimizeResult, (dict(self.items()),)

    def __eq__(self, other):
        return dict(self.items()) == (dict(other.items()) if isinstance(other, OptimizeResult) else other)

    __hash__ = None

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value

    def __dir__(self):
        return list(self.keys())

    def __repr__(self) -> str:
        if not self:
            return "OptimizeResult()"
        if is_jax(self["status"]) and is_traced(self["status"]):             # printed inside jax.jit: no values to count
            return f"OptimizeResult({self['status'].shape[0]} problems, traced; keys {', '.join(self.keys())})"
        status = np.asarray(self["status"])
        converged = int(np.sum(np.asarray(self["success"])))
        codes = ", ".join(f"{int(c)}: {int(np.sum(status == c))}" for c in np.unique(status))
        keys = ", ".join(self.keys())
        return f"OptimizeResult({len(status)} problems, {converged} converged; status counts {{{codes}}}; keys {keys})"


def finish(result: dict) -> OptimizeResult:
    """Add ``success`` and ``message`` from ``status`` (numpy arrays; JAX arrays keep their type)."""
    status = result["status"]
    result["success"] = status > 0
    if isinstance(status, np.ndarray):
        result["message"] = messages(status)
    return OptimizeResult(result)
