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


def messages(status: np.ndarray) -> np.ndarray:
    """The message of each problem's status code (an array of str of the same shape)."""
    status = np.asarray(status)
    out = np.empty(status.shape, dtype=object)
    for code, text in MESSAGES.items():
        out[status == code] = text
    return out.astype(str)
