"""Shared helpers for the reverse-mode tests (no tests here): derive from LLVM text, JIT, and
compare the adjoint with central finite differences of the objective

    L = dret * f(args) + sum_k <seed_k, a_k after the call>   over every Dup array a_k

whose gradient with respect to the *initial* values is exactly what the combined adjoint
leaves in the shadows (Active scalars: in their one-element accumulators).
"""
from __future__ import annotations

import numpy as np

from adoffload.enzyme.activity import ACTIVE, CONST, DUP
from adoffload.enzyme.host import compile_host
from adoffload.enzyme.reverse import reverse
from adoffload.ir import canonicalize, import_module


def derive(src: str, name: str, activity, *, canonical: bool = True, **options):
    """Import ``src`` (canonicalized), derive ``name`` in reverse mode; returns (module, result)."""
    module = import_module(canonicalize(src) if canonical else src)
    return module, reverse(module, module[name], activity, **options)


def objective(f, args, activity, seeds, dret):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    out = f(*args)
    total = dret * out if out is not None else 0.0
    for a, act, seed in zip(args, activity, seeds):
        if act is DUP and isinstance(a, np.ndarray):
            total += float(np.dot(seed.ravel(), a.ravel()))
    return total


def run_adjoint(fns, result, args, activity, seeds, dret, returns_value, tape_bytes=None):
    """Call the derived function; returns the gradient per non-Const argument."""
    shadows = []
    for a, act, seed, param in zip(args, activity, seeds, result.function.args):
        if act is CONST:
            continue
        dtype = np.float32 if str(param.type) == "float" else np.float64
        shadows.append(seed.copy() if isinstance(a, np.ndarray) else np.zeros(1, dtype))
    call = [a.copy() if isinstance(a, np.ndarray) else a for a in args] + shadows
    if returns_value:
        call.append(dret)
    if result.tape is not None:
        count = np.zeros(1, dtype=np.int64)
        fns[result.tape.count_function](*[a.copy() if isinstance(a, np.ndarray) else a for a in args], count)
        assert count[0] % result.tape.alignment == 0
        tape = np.full(max(1, int(count[0]) // 8) + 1, np.nan)
        call += [tape, 8]                                 # a nonzero offset, as for thread 1
        if tape_bytes is not None:
            tape_bytes.append(int(count[0]))
    fns[result.function.name](*call)
    return shadows


def check_reverse(src, name, activity, args, *, rtol=1e-6, atol=1e-8, seed=0, h=1e-6, **options):
    """Derive, run, and compare every gradient entry with central differences. Returns the result."""
    module, result = derive(src, name, activity, **options)
    fns = compile_host(module)
    f = fns[name]
    rng = np.random.default_rng(seed)
    seeds = [rng.standard_normal(a.shape) if isinstance(a, np.ndarray) and act is DUP else None
             for a, act in zip(args, activity)]
    returns_value = result.function.args[-1].name == "dret" or any(a.name == "dret" for a in result.function.args)
    dret = float(rng.standard_normal()) if returns_value else 0.0
    grads = run_adjoint(fns, result, args, activity, seeds, dret, returns_value)
    k = 0
    for i, (a, act) in enumerate(zip(args, activity)):
        if act is CONST:
            continue
        got = grads[k]
        k += 1
        if isinstance(a, np.ndarray):
            want = np.zeros_like(a)
            for e in range(a.size):
                up, down = [x.copy() if isinstance(x, np.ndarray) else x for x in args], \
                           [x.copy() if isinstance(x, np.ndarray) else x for x in args]
                up[i].ravel()[e] += h
                down[i].ravel()[e] -= h
                want.ravel()[e] = (objective(f, up, activity, seeds, dret)
                                   - objective(f, down, activity, seeds, dret)) / (2 * h)
        else:
            up, down = list(args), list(args)
            up[i] += h
            down[i] -= h
            want = np.array([(objective(f, up, activity, seeds, dret)
                              - objective(f, down, activity, seeds, dret)) / (2 * h)])
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"gradient of argument {i}")
    return module, result


__all__ = ["ACTIVE", "CONST", "DUP", "check_reverse", "derive", "compile_host", "run_adjoint"]
