"""The tape-sizing pass of ``ez.autodiff`` reverse mode on llm.c-style C, before and after the control slice.

Before: the counting function is the whole primal (``control_slice=False``), compiled with the
derivative's pipeline (O2), as ``ez.autodiff`` did it. After: the counting function ``ez.autodiff``
builds now (control_slice.py, compiled by codegen/optimize.optimize_counting_module). Both count the
same bytes (checked here). Host only; prints one row per kernel and size with the median of
``--repeat`` calls and the load average. Run: ``PYTHONPATH=. python -m benchmarks.tape_sizing``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.enzyme import api, tape
from adoffload.enzyme.counting import add_counting_function
from adoffload.enzyme.host import compile_host

HEADER = "#include <math.h>\n#include <stdlib.h>\n#include <stddef.h>\n"

# llm.c's train_gpt2.c kernels as written there (float, no restrict)
LAYERNORM = r"""
void layernorm_forward(float* out, float* mean, float* rstd, float* inp, float* weight, float* bias,
                       int B, int T, int C) {
    float eps = 1e-5f;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* x = inp + b * T * C + t * C;
            float m = 0.0f;
            for (int i = 0; i < C; i++) m += x[i];
            m = m / C;
            float v = 0.0f;
            for (int i = 0; i < C; i++) { float xshift = x[i] - m; v += xshift * xshift; }
            v = v / C;
            float s = 1.0f / sqrtf(v + eps);
            float* out_bt = out + b * T * C + t * C;
            for (int i = 0; i < C; i++) {
                float n = (s * (x[i] - m));
                float o = n * weight[i] + bias[i];
                out_bt[i] = o;
            }
            mean[b * T + t] = m;
            rstd[b * T + t] = s;
        }
    }
}
"""
MATMUL = r"""
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int B, int T, int C, int OC) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* out_bt = out + b * T * OC + t * OC;
            const float* inp_bt = inp + b * T * C + t * C;
            for (int o = 0; o < OC; o++) {
                float val = (bias != NULL) ? bias[o] : 0.0f;
                const float* wrow = weight + o * C;
                for (int i = 0; i < C; i++) val += inp_bt[i] * wrow[i];
                out_bt[o] = val;
            }
        }
    }
}
"""


def _arrays(fname, B, T, C, OC, rng):
    f = lambda n: rng.standard_normal(n).astype(np.float32)
    z = lambda n: np.zeros(n, np.float32)
    if fname == "layernorm_forward":
        primal = [z(B * T * C), z(B * T), z(B * T), f(B * T * C), f(C), f(C), B, T, C]
        acts = [ez.Duplicated(primal[0], f(B * T * C)), ez.Const(primal[1]), ez.Const(primal[2]),
                ez.Duplicated(primal[3], z(B * T * C)), ez.Duplicated(primal[4], z(C)), ez.Duplicated(primal[5], z(C)),
                B, T, C]
    else:
        primal = [z(B * T * OC), f(B * T * C), f(OC * C), f(OC), B, T, C, OC]
        acts = [ez.Duplicated(primal[0], f(B * T * OC)), ez.Duplicated(primal[1], z(B * T * C)),
                ez.Duplicated(primal[2], z(OC * C)), ez.Duplicated(primal[3], z(OC)), B, T, C, OC]
    return primal, acts


def _median_ms(count, primal, repeat):
    times = []
    for _ in range(repeat):
        scratch = [p.copy() if isinstance(p, np.ndarray) else p for p in primal]   # as api._tape
        nbytes = np.zeros(1, np.int64)
        start = time.perf_counter()
        count(*scratch, nbytes)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, int(nbytes[0])


def measure(source, fname, opt, sizes, repeat):
    B, T, C, OC = sizes
    primal, acts = _arrays(fname, B, T, C, OC, np.random.default_rng(0))
    return measure_call(source, fname, opt, primal, acts, repeat)


def measure_call(source, fname, opt, primal, acts, repeat):
    recorded = []
    original = tape.add_counting_function

    def recording(module, primal, name, counters, **options):
        recorded.append(counters)
        return original(module, primal, name, counters, **options)
    tape.add_counting_function = recording
    try:
        api._CACHE.clear()
        fn = ado.from_c(source if source.startswith("#include") else HEADER + source, opt=opt)[fname]
        ez.autodiff(ez.Reverse, fn, *acts)
    finally:
        tape.add_counting_function = original
    (_, _, after), = [v for k, v in api._CACHE.items() if k[1] == fname]
    if after is None:
        return None                         # no dynamic tape: nothing to size
    module = after.fn.parent
    full = add_counting_function(module, module.functions[fname], f"{fname}.full", recorded[-1], control_slice=False)
    before = compile_host(module, [full.name])[full.name]
    t_before, n_before = _median_ms(before, primal, repeat)
    t_after, n_after = _median_ms(after, primal, repeat)
    assert n_before == n_after, (fname, n_before, n_after)
    return t_before, t_after, n_after


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--opt", type=int, nargs="+", default=[2])
    args = parser.parse_args(argv)
    # GPT-2 small's shapes at llm.c's test batch (B=4, T=64), and a small one
    cases = [(LAYERNORM, "layernorm_forward", (4, 64, 768, 0)), (MATMUL, "matmul_forward", (4, 64, 768, 2304)),
             (MATMUL, "matmul_forward", (4, 64, 768, 3072)), (LAYERNORM, "layernorm_forward", (2, 8, 64, 0)),
             (MATMUL, "matmul_forward", (2, 8, 64, 96))]
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores")
    print("| kernel | clang | B, T, C(, OC) | tape bytes | sizing before (ms) | sizing after (ms) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for opt in args.opt:
        for source, fname, sizes in cases:
            measured = measure(source, fname, opt, sizes, args.repeat)
            shown = ", ".join(str(s) for s in (sizes if fname == "matmul_forward" else sizes[:3]))
            if measured is None:
                print(f"| {fname} | -O{opt} | {shown} | no tape | - | - | - |", flush=True)
                continue
            t_before, t_after, nbytes = measured
            print(f"| {fname} | -O{opt} | {shown} | {nbytes} | {t_before:.3f} | {t_after:.4f} | "
                  f"{t_before / t_after:.0f}x |", flush=True)
    from tests.ad.test_pointer_memory import GPT, HEADER as GPT_HEADER   # llm.c's structs of pointers
    for opt in args.opt:
        T, V, C = 64, 256, 128
        n_params = 2 * V * C + 2 * C + V
        rng = np.random.default_rng(1)
        params = 0.1 * rng.standard_normal(n_params)
        tokens, targets = (rng.integers(0, V, T).astype(np.int32) for _ in range(2))
        primal = [params, tokens, targets, T, V, C]
        acts = [ez.Duplicated(params.copy(), np.zeros(n_params)), ez.Const(tokens), ez.Const(targets), T, V, C]
        measured = measure_call(GPT_HEADER + GPT, "gpt_loss", opt, primal, acts, args.repeat)
        if measured is None:
            print(f"| gpt_loss | -O{opt} | T, V, C = {T}, {V}, {C} | no tape | - | - | - |", flush=True)
            continue
        t_before, t_after, nbytes = measured
        print(f"| gpt_loss (tests/ad/test_pointer_memory.py, double) | -O{opt} | T, V, C = {T}, {V}, {C} | {nbytes} | "
              f"{t_before:.3f} | {t_after:.4f} | {t_before / t_after:.0f}x |", flush=True)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
