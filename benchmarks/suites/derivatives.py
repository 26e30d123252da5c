"""Derivative kernels over their primal: RAJAPerf's JVP and adjoint kernels on the GPU, and kernels that need a tape.

RAJAPerf rows (GPU): for each kernel with derivatives, the primal launch and four derivative
kernels, each timed alone with the one timer: ``jvp``/``vjp`` are the lean kernels the JAX rules
run (``primal_outputs=False``: no primal stores; the adjoint reads once-stored seeds without
clearing them, enzyme/lean.py), ``jvp_full``/``vjp_full`` the defaults of ``ado.jvp``/``ado.vjp``
(primal outputs stored, seeds cleared). ``*_ratio`` is over the primal; ``*_bytes_ratio`` is the
derivative's array bytes (each array its code reads or writes, once per direction, from the IR)
over the primal's, the time ratio at equal bandwidth. ``jax_jvp_ms``/``jax_vjp_ms``: ``jax.jvp`` and
``jax.vjp`` of the jnp version (all-ones tangents and cotangents, as our kernels are seeded).

Tape rows (any device, through ``jax.jit``): a block sum whose halving loop starts at a parameter
(too many trips for a static tape, so its VJP sizes a dynamic tape on the device) and a recurrence
with a data-dependent trip count per thread; VJP / primal, each VJP checked first.
"""
from __future__ import annotations

import time

import numpy as np

import adoffload as ado

from ..launching import OurLaunch, select_cases
from ..timing import REPS, Timing, time_jax

DEVICES = ("cpu", "cuda")
SIZE_KEY = "n"
SIZES, QUICK_SIZES = (1 << 26,), (1 << 20,)
TAPE_SIZES, TAPE_QUICK_SIZES = {"cuda": 1 << 24, "cpu": 1 << 18}, {"cuda": 1 << 16, "cpu": 1 << 12}

# (column prefix, derive, lean)
DERIVATIVES = (("jvp", ado.jvp, True), ("vjp", ado.vjp, True), ("jvp_full", ado.jvp, False),
               ("vjp_full", ado.vjp, False))


def add_arguments(parser) -> None:
    parser.add_argument("--kernels", nargs="*", help="RAJAPerf cases (default: every case with derivatives)")
    parser.add_argument("--sizes", nargs="*", type=int, help="RAJAPerf element counts (default: 2^26)")
    parser.add_argument("--budget", type=float, help="seconds after which no RAJAPerf case starts")
    parser.add_argument("--no-tapes", action="store_true", help="skip the tape rows")


def run(rows, device: str, quick: bool, options) -> None:
    import jax
    jax.config.update("jax_enable_x64", True)
    reps = options.reps or (5 if quick else REPS)
    if not options.no_tapes:
        n = (TAPE_QUICK_SIZES if quick else TAPE_SIZES)[device]
        for name, measure in (("block_sum_dynamic", dynamic_block_sum), ("recurrence", dynamic_recurrence)):
            try:
                rows.append(measure(n, reps, device))
            except Exception as exc:  # noqa: BLE001 - reported in the row
                rows.append({"case": name, "n": n, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
    if device != "cuda":
        rows.append({"case": "rajaperf", "skipped": "the RAJAPerf derivative rows launch on a CUDA GPU"})
        return
    from ..gpu import Gpu
    gpu = Gpu()
    cases = [c for c in select_cases(options.kernels) if c.wrt]
    rng, modules, start = np.random.default_rng(0), {}, time.perf_counter()
    for case in cases:
        for n in tuple(options.sizes or (QUICK_SIZES if quick else SIZES)):
            row = {"kernel": case.name, "n": n, "reps": reps}
            if options.budget is not None and time.perf_counter() - start > options.budget:
                rows.append({**row, "skipped": f"not run: the suite's budget ({options.budget:.0f} s) was spent"})
                continue
            t0 = time.perf_counter()
            measure_kernel(row, gpu, case, n, rng, reps, modules)
            row["wall_s"] = time.perf_counter() - t0
            rows.append(row)


def measure_kernel(row: dict, gpu, case, n: int, rng, reps: int, modules: dict) -> None:
    import jax
    dev, primal = {}, None
    try:
        host = case.make(n, rng)
        grid = case.grid(n)
        dev = gpu.upload(host)
        primal = OurLaunch(gpu, case.kernel, dev, host, grid, modules)
        t_primal = gpu.time(primal, reps)
        row.update(t_primal.columns("primal"))
        row.update(derivative_times(gpu, case, host, grid, reps, t_primal, modules))
        row.update(jax_derivative_times(case, host, reps, static={"n": n}))
    except Exception as exc:  # a failing kernel is reported, not hidden
        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        if primal is not None:
            primal.close()
        gpu.free(dev)
        jax.clear_caches()


def array_bytes(kernel, values: dict) -> int:
    """Bytes of the arrays the kernel's code reads plus those it writes, each array once per
    direction: what the kernel must move at the least if every touched array is touched whole
    (an atomic counts as a read and a write; a stencil's neighbours are not counted again)."""
    from adoffload.enzyme.lean import param_accesses
    module, body = kernel.ir()
    accesses = param_accesses(kernel.signature, module.functions[body])
    return sum(np.asarray(values[name]).nbytes * (reads + writes) for name, (reads, writes) in accesses.items())


def derivative_times(gpu, case, host, grid, reps, t_primal: Timing, modules: dict) -> dict:
    out = {"primal_bytes": array_bytes(case.kernel, host)}
    for mode, derive, lean in DERIVATIVES:
        launch, dev = None, {}
        try:
            k = derive(case.kernel, case.wrt, primal_outputs=not lean)
            values = derived_values(k, host)
            dev = gpu.upload(values)
            launch = OurLaunch(gpu, k, dev, values, grid, modules)
            t = gpu.time(launch, reps)
            out.update(t.columns(mode))
            out[f"{mode}_ratio"] = t.median_ms / t_primal.median_ms
            out[f"{mode}_k"] = launch.k
            out[f"{mode}_bytes_ratio"] = array_bytes(k, values) / max(out["primal_bytes"], 1)
        except Exception as exc:
            out[f"{mode}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            if launch is not None:
                launch.close()
            gpu.free(dev)
    return out


def derived_values(kernel, host: dict) -> dict:
    """The derivative kernel's arguments: the primal's, ones for every tangent and seed, zeros for a
    scalar's one-element adjoint."""
    values = dict(host)
    for p in kernel.signature.params:
        if p.name in values:
            continue
        base = host[p.name[2:]]     # the primal outputs a lean kernel skips are in ``host`` (unread Ins)
        if isinstance(base, np.ndarray):
            values[p.name] = np.ones_like(base)
        elif p.is_array:          # reverse mode: a scalar's adjoint is a 1-element array
            values[p.name] = np.zeros(1, p.dtype.dtype)
        else:
            values[p.name] = 1.0
    return values


def jax_derivative_times(case, host: dict, reps: int, static: dict | None = None) -> dict:
    """``jax_jvp_ms``/``jax_vjp_ms`` of the case's jnp version with respect to its ``wrt`` inputs;
    ``static``: Python values the jnp version reads as constants (the grid size ``n``)."""
    import jax
    import jax.numpy as jnp
    if case.jnp is None or not case.wrt:
        return {}
    fixed = {k: jnp.asarray(v) for k, v in host.items() if k not in case.wrt}
    wrt = {k: jnp.asarray(host[k], jnp.float64 if np.asarray(host[k]).dtype == np.float64 else None)
           for k in case.wrt}

    def outputs(inputs):
        return case.jnp({**fixed, **inputs, **(static or {})}, jnp)

    ones = jax.tree.map(jnp.ones_like, wrt)
    cotangents = jax.tree.map(jnp.ones_like, jax.eval_shape(outputs, wrt))
    jvp = jax.jit(lambda w: jax.jvp(outputs, (w,), (ones,)))
    vjp = jax.jit(lambda w: jax.vjp(outputs, w)[1](cotangents))
    out = {}
    for name, f in (("jax_jvp_ms", jvp), ("jax_vjp_ms", vjp)):
        try:
            out[name] = time_jax(f, wrt, reps=reps).median_ms
        except Exception as exc:      # reported in the row, never hidden
            out[name.replace("_ms", "_error")] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out


# ----------------------------------------------------------------------------- kernels that need a tape

@ado.kernel(block=128)
def block_sum_dynamic(x: ado.In[ado.f64], start: ado.i64, out: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    s = ado.shared(128, ado.f64)
    s[t] = x[i] * x[i]
    ado.sync_threads()
    h = start                  # 64, but a parameter: up to 64 trips, too many for a static tape
    while h > 0:
        if t < h:
            s[t] += s[t + h]
        ado.sync_threads()
        h = h // 2
    if t == 0:
        out[ado.block_id()] = s[0]


@ado.kernel
def recurrence(x: ado.In[ado.f64], steps: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    acc = x[i]
    for j in range(steps[i]):
        acc = ado.sin(acc) * 0.9 + 0.1 * x[i]
    out[i] = acc


def _tape_row(case: str, n: int, f, args, reps: int, device: str, check) -> dict:
    import jax
    import jax.numpy as jnp
    primal = jax.jit(f)
    out = primal(*args)
    vjp = jax.jit(lambda *a: jax.vjp(f, *a)[1](jnp.ones_like(out))[0])
    check(np.asarray(vjp(*args)))
    t_primal, t_vjp = time_jax(primal, *args, reps=reps), time_jax(vjp, *args, reps=reps)
    return {"case": case, "n": n, "device": device, "agree": True, **t_primal.columns("primal"),
            **t_vjp.columns("vjp"), "vjp_ratio": t_vjp.median_ms / t_primal.median_ms}


def _on(device: str):
    import jax
    return jax.devices("gpu" if device == "cuda" else "cpu")[0]


def dynamic_block_sum(n: int, reps: int, device: str) -> dict:
    import jax
    assert ado.vjp(block_sum_dynamic, ["x"]).tape is not None, "the case must keep a dynamic tape"
    call = ado.jax_kernel(block_sum_dynamic, grid=n, out_shapes={"out": n // 128})
    x = jax.device_put(np.random.default_rng(0).standard_normal(n), _on(device))
    expected = 2 * np.asarray(x)                     # d/dx sum(x^2) = 2x

    def check(got):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    return _tape_row("block_sum_dynamic", n, lambda x: call(x, 64), (x,), reps, device, check)


def dynamic_recurrence(n: int, reps: int, device: str) -> dict:
    import jax
    import jax.numpy as jnp
    call = ado.jax_kernel(recurrence, out_shapes={"out": n})
    rng = np.random.default_rng(1)
    x = jax.device_put(rng.uniform(0.1, 1.0, n), _on(device))
    steps = jax.device_put(rng.integers(0, 8, n), _on(device))

    def reference(x):         # the same recurrence in JAX, steps masked per element
        acc = x
        for j in range(8):
            acc = jnp.where(j < steps, jnp.sin(acc) * 0.9 + 0.1 * x, acc)
        return acc
    expected = np.asarray(jax.vjp(reference, x)[1](jnp.ones_like(x))[0])

    def check(got):
        np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-12)
    return _tape_row("recurrence", n, lambda x: call(x, steps), (x,), reps, device, check)


COLUMNS = ["kernel", "case", "n", "primal_ms", "jvp_ratio", "vjp_ratio", "jvp_full_ratio", "vjp_full_ratio",
           "jvp_bytes_ratio", "vjp_bytes_ratio", "jvp_ms", "vjp_ms", "jvp_full_ms", "vjp_full_ms", "jax_jvp_ms",
           "jax_vjp_ms"]
