"""``minimize`` and ``least_squares``: batches of small problems, each solved by one thread (``minimize``'s
``layout="warp"``: one warp, layout.py) in one launch.

Names and conventions follow ``scipy.optimize`` (docs/optimize.md). The function is an ``@ado.func``;
its derivatives are built inside the optimizer kernel by the AD engine (``ado.value_and_grad`` for
``minimize``, ``ado.jvp`` of width n, the Jacobian's columns, for ``least_squares``). Inputs are
numpy arrays (results are numpy arrays) or JAX arrays (the kernel runs as a JAX custom call: ``jax.jit`` and
``jax.vmap`` compose; results are JAX arrays).
"""
from __future__ import annotations

import inspect

import numpy as np

from ..errors import ArgumentError, CompilationError
from . import bfgs, fire, generate, lbfgs
from .inputs import check_function, check_start, copied_bytes, int_type, is_jax, prepare, start_array
from .layout import WARP_MODULES, check_layout, check_warp, choose, jax_device, target_of
from .result import Deferred, OptimizeResult, finish

EPS = float(np.finfo(np.float64).eps)
METHODS = {"lbfgs": lbfgs, "l-bfgs": lbfgs, "bfgs": bfgs, "fire": fire}
# method -> {option: default}; maxiter None: the method's rule below
OPTIONS = {
    lbfgs: {"gtol": 1e-5, "ftol": 1e7 * EPS, "maxiter": 15000, "maxcor": 10},
    bfgs: {"gtol": 1e-5, "ftol": 0.0, "maxiter": None},
    fire: {"gtol": 1e-5, "maxiter": 10000, "dt_start": 0.1, "dt_max": 1.0, "max_step": 0.2, "group": 1,
           "n_min": 5, "f_inc": 1.1, "f_dec": 0.5, "alpha_start": 0.1, "f_alpha": 0.99},
}


def minimize(fun, x0, args=(), method: str = "lbfgs", tol: float | None = None, maxiter: int | None = None,
             device: str = "cpu", options: dict | None = None, layout: str = "auto") -> OptimizeResult:
    """Minimize ``fun(x, *args)`` for every row of ``x0`` (shape ``(batch, n)``), one problem per thread
    or per warp (``layout``: "thread", "warp" (L-BFGS and BFGS) or "auto", the rule of layout.py).

    ``method``: ``"lbfgs"`` (limited-memory BFGS, scipy's L-BFGS-B without bounds), ``"bfgs"`` (dense
    inverse Hessian, scipy's BFGS) or ``"fire"`` (FIRE, Bitzek et al. 2006, for atomistic energies).
    ``tol`` sets ``gtol`` (and for L-BFGS ``ftol``) as in scipy; ``options`` the rest (``OPTIONS``).
    ``args`` as in inputs.py. Returns an ``OptimizeResult`` of per-problem arrays ``x``, ``fun``,
    ``jac``, ``success``, ``status``, ``message``, ``nit``, ``nfev``.
    """
    what = "adoffload.optimize.minimize"
    use_jax = is_jax(x0)
    kernel, inputs, shapes, dtype, batch = minimize_call(fun, x0, args, method, tol, maxiter, options, what, use_jax,
                                                         layout=layout, device=None if use_jax else device)
    out = _run(kernel, inputs, shapes, dtype, batch, device, use_jax)
    return finish({"x": out["x_out"], "fun": out["f_out"], "jac": out["g_out"], "status": out["status_out"],
                   "nit": out["nit_out"], "nfev": out["nfev_out"], "njev": out["nfev_out"]})


def least_squares(residual, x0, args=(), m: int | None = None, method: str = "lm", ftol: float = 1e-8,
                  xtol: float = 1e-8, gtol: float = 1e-8, max_nfev: int | None = None,
                  device: str = "cpu") -> OptimizeResult:
    """Minimize ``0.5 * sum(r**2)`` where ``residual(x, *args, r)`` writes the ``m`` residuals into ``r``,
    for every row of ``x0`` (shape ``(batch, n)``), one problem per thread.

    ``method``: ``"lm"`` (Levenberg-Marquardt with Marquardt's scaling) or ``"gn"`` (Gauss-Newton with a
    backtracking line search). The Jacobian comes from ``ado.jvp(residual, width=n)`` (every column in
    one forward pass; passes of 8 columns above 8 parameters).
    Tolerances as scipy's ``least_squares``; ``max_nfev`` (default ``100 * n``) counts residual
    evaluations at trial points. Returns an ``OptimizeResult`` of per-problem ``x``, ``cost``, ``fun``
    (residuals), ``grad``, ``optimality``, ``success``, ``status``, ``message``, ``nit``, ``nfev``, ``njev``.
    """
    what = "adoffload.optimize.least_squares"
    check_function(residual, what, "residual")
    if not isinstance(method, str) or method.lower() not in ("lm", "gn"):
        raise ArgumentError(f"{what}: unknown method {method!r}; choose 'lm' (Levenberg-Marquardt) or 'gn' "
                            f"(Gauss-Newton)")
    if m is None or isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ArgumentError(f"{what}: m= must be given, the number of residuals residual(x, *args, r) writes "
                            f"into r (a positive int); got {m!r}")
    use_jax = is_jax(x0)
    batch, n, dtype = check_start(x0, what)
    x0 = start_array(x0, use_jax)
    specs, values = prepare(args, batch, dtype, what, use_jax)
    _check_arity(residual, 2 + len(specs), what, "residual(x, *args, r)")
    for name, value in (("ftol", ftol), ("xtol", xtol), ("gtol", gtol)):
        _check_tolerance(name, value, what)
    if ftol < EPS and xtol < EPS and gtol < EPS:
        raise ArgumentError(f"{what}: at least one of ftol, xtol, gtol must be >= machine epsilon ({EPS:.3g}), "
                            f"as in scipy")
    max_nfev = 100 * n if max_nfev is None else _positive_int(max_nfev, "max_nfev", what)
    kernel = generate.least_squares_kernel(residual, n, int(m), dtype, specs, method.lower() == "gn",
                                           int_type(use_jax))
    shapes = {"x_out": (batch, n), "cost_out": (batch,), "r_out": (batch, int(m)), "g_out": (batch, n),
              "status_out": (batch,), "nit_out": (batch,), "nfev_out": (batch,), "njev_out": (batch,)}
    kernel.copied_bytes = copied_bytes(specs, shared_direct=True)     # _run: named if local memory overflows
    out = _run(kernel, [x0] + values + [ftol, xtol, gtol, max_nfev], shapes, dtype, batch, device, use_jax)
    grad = out["g_out"]
    if isinstance(grad, Deferred):
        optimality = Deferred(lambda: max_abs_rows(grad.fetch()))
    else:
        optimality = max_abs_rows(grad) if isinstance(grad, np.ndarray) else abs(grad).max(axis=1)
    return finish({"x": out["x_out"], "cost": out["cost_out"], "fun": out["r_out"], "grad": grad,
                   "optimality": optimality, "status": out["status_out"], "nit": out["nit_out"],
                   "nfev": out["nfev_out"], "njev": out["njev_out"]})


# --- helpers ----------------------------------------------------------------------------------

def minimize_call(fun, x0, args, method, tol, maxiter, options, what: str, use_jax: bool, values: bool = True,
                  layout: str = "auto", device=None, I: str | None = None):
    """(kernel, its inputs in order, Out shapes, dtype, batch) of a ``minimize`` call (also what
    ``compile_ahead`` builds; ``values=False``: ``x0`` only gives the shape and dtype). ``device``: where
    it runs (JAX inputs: None, JAX's default backend), for ``layout="auto"`` and the warp size. ``I``: the
    kernel's integer type (default ``int_type(use_jax)``: JAX's x64 mode now)."""
    check_function(fun, what, "fun")
    if not isinstance(method, str) or method.lower() not in METHODS:
        hint = " (bounds are not supported: use 'lbfgs')" if str(method).lower() == "l-bfgs-b" else ""
        raise ArgumentError(f"{what}: unknown method {method!r}{hint}; choose one of 'lbfgs', 'bfgs', 'fire'")
    module = METHODS[method.lower()]
    batch, n, dtype = check_start(x0, what, values)
    if values:
        x0 = start_array(x0, use_jax)
    specs, arg_values = prepare(args, batch, dtype, what, use_jax)
    _check_arity(fun, 1 + len(specs), what, "fun(x, *args)")
    opts = _options(module, tol, maxiter, options, what, n)
    static = {"H": int(opts["maxcor"])} if module is lbfgs else {"G": int(opts["group"])} if module is fire else {}
    layout = check_layout(layout, module, what)
    if layout == "warp":
        check_warp(module, n, what)
    if device is None:
        device = jax_device() if use_jax else "cpu"
    I = I or int_type(use_jax)
    chosen = choose(layout, module, n, batch, device,
                    lambda: generate.minimize_kernel(fun, module, n, dtype, specs, static, I))
    scratch = {}
    if chosen == "warp":
        warp = target_of(device)[1]
        kernel = generate.minimize_warp_kernel(fun, WARP_MODULES[module], n, dtype, specs, static, warp, I)
        scratch = {name: (batch * size,) for name, size in
                   generate.warp_scratch(WARP_MODULES[module], n, static, warp).items()}
        kernel.problems_per_launch = warp      # _run: grid = batch * warp
    else:
        kernel = generate.minimize_kernel(fun, module, n, dtype, specs, static, I)
    kernel.copied_bytes = copied_bytes(specs)          # _run: named if local memory overflows
    settings = [opts["gtol"], opts.get("ftol", 0.0), int(opts["maxiter"])] + \
        [opts[name] for name, _ in module.KERNEL_PARAMS]
    shapes = {"x_out": (batch, n), "f_out": (batch,), "g_out": (batch, n), "status_out": (batch,),
              "nit_out": (batch,), "nfev_out": (batch,), **scratch}
    return kernel, [x0] + arg_values + settings, shapes, dtype, batch


def _run(kernel, inputs: list, shapes: dict, dtype, batch: int, device: str, use_jax: bool) -> dict:
    if use_jax:
        from .jax_bridge import call
        return call(kernel, inputs, shapes)
    lanes = getattr(kernel, "problems_per_launch", 1)
    on_gpu = _on_gpu(device) and bool(batch)      # the device checked for an empty batch too
    deferred = _DEFERRED_OUTPUTS if on_gpu else ()
    outs = {name: _device_output(shape, dtype, device) if name in deferred or (on_gpu and name not in _RESULTS)
            else _output(shape, np.int64 if name in _INT_OUTPUTS else dtype) for name, shape in shapes.items()}
    if batch:
        try:
            kernel(*inputs, *outs.values(), grid=batch * lanes, device=device)
        except CompilationError as exc:
            if "local arrays" not in str(exc):
                raise
            from .layout import WARP_MAX_N
            warp = "layout='warp' (the state in global scratch arrays, one problem per warp), " \
                if inputs[0].shape[1] <= WARP_MAX_N else ""
            hint = (f"use {warp}method='lbfgs' with a smaller maxcor, or fewer parameters per problem"
                    if lanes == 1 else "fewer parameters per problem (lane 0 still holds x, g and the function's "
                    "own locals)")
            if kernel.name.startswith("least_squares_"):       # no layouts, no methods with less state
                hint = ("fewer parameters or residuals per problem (the Jacobian, m x n, and the n x n normal "
                        "equations are local arrays), or minimize 0.5 * sum(r**2) with adoffload.optimize.minimize")
            from ..kernels.local_memory import LOCAL_MEMORY_LIMITS
            copies = getattr(kernel, "copied_bytes", 0)
            if copies >= LOCAL_MEMORY_LIMITS[target_of(device)[0]] // 4:
                hint += (f"; {copies} bytes of that are the copies of the problem's arrays from args (each "
                         f"array the function receives is copied into the thread: pass less data per problem)")
            raise CompilationError(f"{exc}. adoffload.optimize keeps {'the problem' if lanes > 1 else 'each problem'}"
                                   f"'s {'evaluation' if lanes > 1 else 'whole state'} in one thread "
                                   f"(n={inputs[0].shape[1]}): {hint}") from None
    return {name: Deferred(value.to_numpy) if name in deferred else value for name, value in outs.items()
            if name in _RESULTS or name in _INT_OUTPUTS or name in _DEFERRED_OUTPUTS}


_INT_OUTPUTS = frozenset({"status_out", "nit_out", "nfev_out", "njev_out"})
# every Out array that is a result (the rest, the warp layout's scratch, stays on the GPU, unread)
_RESULTS = frozenset({"x_out", "f_out", "g_out", "cost_out", "r_out", "status_out", "nit_out", "nfev_out",
                      "njev_out"})
# batch x n or batch x m arrays a script rarely reads in full (residuals, gradients): on a GPU they stay
# on the device until the result's field is read (result.Deferred)
_DEFERRED_OUTPUTS = frozenset({"r_out", "g_out"})


def _on_gpu(device) -> bool:
    from ..runtime import get_device
    return get_device(device).kind != "cpu"


def _device_output(shape: tuple, dtype, device):
    from ..runtime.dlpack import DeviceArray
    return DeviceArray.empty(shape, dtype, device=device)


def max_abs_rows(a: np.ndarray) -> np.ndarray:
    """``np.max(np.abs(a), axis=1)`` of a (batch, n) array, the same values (NaN included): for a few
    columns one ``np.maximum`` pass per column, 10-20x faster than numpy's reduction along short rows."""
    if a.ndim != 2 or a.shape[1] > 16 or a.shape[1] == 0:
        return np.max(np.abs(a), axis=1)
    out = np.abs(a[:, 0])
    for j in range(1, a.shape[1]):
        np.maximum(out, np.abs(a[:, j]), out=out)
    return out


def _output(shape: tuple, dtype) -> np.ndarray:
    """An Out array of the kernel, not zeroed here: the launcher zeroes every Out array the kernel is
    not proven to write in full (kernels/launch_plan.arrays_to_zero) on the host, and on a GPU copies
    the whole device buffer (zeroed, then written) back into it; a launch that fails raises, and these
    arrays are then dropped unseen."""
    return np.empty(shape, dtype)


def _check_arity(fun, count: int, what: str, form: str) -> None:
    try:
        parameters = inspect.signature(fun.pyfunc).parameters
    except (TypeError, ValueError):
        return
    if len(parameters) != count:
        raise ArgumentError(f"{what}: {form} is called with {count} argument(s), but '{fun.__name__}' takes "
                            f"{len(parameters)} ({', '.join(parameters)})")


def _check_tolerance(name: str, value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not np.isfinite(value) or value < 0:
        raise ArgumentError(f"{what}: {name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _positive_int(value, name: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ArgumentError(f"{what}: {name} must be a positive int, got {value!r}")
    return int(value)


def _options(module, tol, maxiter, options, what: str, n: int) -> dict:
    defaults = OPTIONS[module]
    options = dict(options or {})
    unknown = set(options) - set(defaults)
    if unknown:
        raise ArgumentError(f"{what}: unknown option(s) {sorted(unknown)} for method "
                            f"'{module.__name__.rsplit('.', 1)[-1]}'; known: {sorted(defaults)}")
    opts = dict(defaults)
    if tol is not None:
        _check_tolerance("tol", tol, what)
        opts["gtol"] = float(tol)
        if module is lbfgs:
            opts["ftol"] = float(tol)
    opts.update(options)
    if maxiter is not None:
        opts["maxiter"] = maxiter
    if opts["maxiter"] is None:             # options={"maxiter": None}: the method's default, as left out
        opts["maxiter"] = 200 * n if defaults["maxiter"] is None else defaults["maxiter"]
    opts["maxiter"] = _positive_int(opts["maxiter"], "maxiter", what)
    for name in ("gtol", "ftol"):
        if name in opts:
            opts[name] = _check_tolerance(name, opts[name], what)
    if module is lbfgs:
        opts["maxcor"] = _positive_int(opts["maxcor"], "maxcor", what)
    if module is fire:
        fire.check_options(opts, n, what)
    return opts


__all__ = ["minimize", "least_squares", "OptimizeResult"]
