"""Per-problem outcome codes of ``minimize`` and ``least_squares`` (scipy's ``least_squares`` codes, 0-4).

A code above 0 is a convergence test that held (``success``); 0 and below are failures, and the ``x``
returned with them is the last accepted point, not a minimum.
"""
from __future__ import annotations

import numpy as np

CONTINUE = 100          # kernels only: the iteration goes on (never returned)
GTOL, FTOL, XTOL, FTOL_XTOL = 1, 2, 3, 4
MAXITER, LINE_SEARCH, NONFINITE, SINGULAR = 0, -1, -2, -3

MESSAGES = {
    GTOL: "the largest gradient component is at most gtol",
    FTOL: "the relative reduction of the function in the last step is at most ftol",
    XTOL: "the relative size of the last step is at most xtol",
    FTOL_XTOL: "both ftol and xtol are satisfied",
    MAXITER: "the maximum number of iterations (function evaluations) was reached",
    LINE_SEARCH: "no step along the search direction decreases the function (line search failed, also "
                 "from steepest descent): the tolerances may be too small for the function's rounding",
    NONFINITE: "the function, its gradient or its Jacobian is not finite at the start (or, for least_squares, "
               "the Jacobian at an accepted point)",
    SINGULAR: "the normal equations J^T J are singular (Gauss-Newton; method='lm' damps them)",
}


_LOW = min(MESSAGES)
_TABLE = np.array([MESSAGES.get(code, f"status code {code}") for code in range(_LOW, max(MESSAGES) + 1)], dtype=object)


def messages(status: np.ndarray) -> np.ndarray:
    """The message of each problem's status code: an object array of the shape of ``status`` whose
    entries are the ``MESSAGES`` strings themselves (8 bytes a problem; a fixed-width str array of a
    million problems would take 668 MB and over a second to build). A code outside ``MESSAGES``
    (never returned by the kernels) reads ``"status code N"``."""
    status = np.asarray(status)
    index = status.astype(np.int64) - _LOW
    inside = (index >= 0) & (index < len(_TABLE))
    if inside.all():
        return _TABLE[index]
    out = _TABLE[np.where(inside, index, 0)]
    for position in zip(*np.nonzero(~inside)):
        out[position] = f"status code {int(status[position])}"
    return out
