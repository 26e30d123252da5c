"""The result of a batch of problems: scipy's ``OptimizeResult`` with one entry per problem."""
from __future__ import annotations

import numpy as np

from .status import messages


class OptimizeResult(dict):
    """A dict with attribute access (as scipy's), every entry an array over the problems: ``x``
    ``(batch, n)``, ``success``, ``status`` (status.py), ``message``, ``nit``, ``nfev``; ``minimize``
    adds ``fun`` and ``jac``, ``least_squares`` adds ``cost``, ``fun`` (the residuals), ``grad``
    (``J^T r``), ``optimality`` (``max |grad|``) and ``njev``."""

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
