"""Run examples/chemistry/lj_clusters.py with timers on adoffload's compile stages and JAX's compile events.

usage: python tmp_probe/gpu_coldcompile_run.py OUT.json -- <lj_clusters.py arguments>
Writes {stage: {"total_s", "calls", "threads"}} and an interval list (seconds since this runner
started) to OUT.json and prints a summary. The example's own clock starts after this runner's imports.
"""
import atexit
import functools
import json
import os
import runpy
import sys
import threading
import time
from collections import defaultdict

T0 = time.perf_counter()
out_path = sys.argv[1]
example_args = sys.argv[sys.argv.index("--") + 1:]
INTERVALS = []
LOCK = threading.Lock()


def record(label, start, end):
    with LOCK:
        INTERVALS.append((label, threading.current_thread().name, start - T0, end - T0))


def wrap(module, name, label):
    fn = getattr(module, name)

    @functools.wraps(fn)
    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            record(label, t, time.perf_counter())
    setattr(module, name, timed)


import logging  # noqa: E402
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(threadName)s: %(message)s")
logging.getLogger("adoffload.codegen.gpu.cubin").setLevel(logging.DEBUG)   # why a module had no cubin
import jax  # noqa: E402
import adoffload  # noqa: E402
from adoffload import codegen, frontend, ir  # noqa: E402
import adoffload.enzyme.inner  # noqa: E402
import adoffload.codegen.gpu.nvptx  # noqa: E402
import adoffload.codegen.gpu.cubin  # noqa: E402
import adoffload.jax.targets  # noqa: E402
import adoffload.jax.handler  # noqa: E402
M = sys.modules
wrap(frontend, "compile_kernel", "front end (compile_kernel)")
wrap(M["adoffload.enzyme.inner"], "resolve_inner_derivatives", "AD in kernels (resolve_inner_derivatives)")
wrap(ir, "canonicalize", "canonicalize (ir.canonicalize)")
wrap(codegen, "compile_for_target", "codegen total (compile_for_target)")
wrap(M["adoffload.codegen.gpu.nvptx"], "optimize_module", "LLVM O3 for NVPTX")
wrap(M["adoffload.codegen.gpu.nvptx"], "compile_ptx", "LLVM IR -> PTX (link, O3, emit)")
wrap(M["adoffload.codegen.gpu.cubin"].PendingCubin, "result", "waiting for ptxas (PendingCubin.result)")
wrap(M["adoffload.codegen.gpu.cubin"], "load_cuda_module", "module load (cubin or driver JIT)")
wrap(M["adoffload.jax.targets"], "_cuda_target", "JAX CUDA target build (_cuda_target)")
wrap(M["adoffload.jax.targets"], "build_ahead", "compile-ahead build (build_ahead)")
wrap(M["adoffload.jax.handler"].CompiledHandler, "__init__", "FFI handler MCJIT (CompiledHandler)")

JAX_EVENTS = defaultdict(float)
JAX_COUNTS = defaultdict(int)


XLA_COMPILES = []


def listener(event, duration, **kwargs):
    now = time.perf_counter()
    with LOCK:
        JAX_EVENTS[event] += duration
        JAX_COUNTS[event] += 1
        if event.endswith("backend_compile_duration"):
            XLA_COMPILES.append((round(now - duration - T0, 3), round(duration, 3), str(kwargs.get("fun_name", "")),
                                 threading.current_thread().name))
jax.monitoring.register_event_duration_secs_listener(listener)


def report():
    totals, calls, threads = defaultdict(float), defaultdict(int), defaultdict(set)
    for label, thread, start, end in INTERVALS:
        totals[label] += end - start
        calls[label] += 1
        threads[label].add(thread)
    stages = {label: {"total_s": round(totals[label], 3), "calls": calls[label], "threads": sorted(threads[label])}
              for label in totals}
    jax_events = {e: {"total_s": round(JAX_EVENTS[e], 3), "calls": JAX_COUNTS[e]} for e in JAX_EVENTS}
    cubin = dict(M["adoffload.codegen.gpu.cubin"].STATS)
    data = {"args": example_args, "runner_s": round(time.perf_counter() - T0, 3), "stages": stages,
            "jax_events": jax_events, "cubin_stats": cubin, "xla_compiles": XLA_COMPILES,
            "intervals": [(l, t, round(a, 3), round(b, 3)) for l, t, a, b in INTERVALS if b - a > 0.02]}
    with open(out_path, "w") as f:
        json.dump(data, f, indent=1)
    print(f"\n== compile breakdown ({' '.join(example_args)}; ADOFFLOAD_PTXAS={os.environ.get('ADOFFLOAD_PTXAS', '')}) ==")
    for label in sorted(stages, key=lambda l: -stages[l]["total_s"]):
        s = stages[label]
        print(f"  {label:48s} {s['total_s']:7.2f} s  x{s['calls']:<3d} {','.join(s['threads'])}")
    for e in sorted(jax_events, key=lambda e: -jax_events[e]["total_s"])[:8]:
        print(f"  jax {e:60s} {jax_events[e]['total_s']:7.2f} s  x{jax_events[e]['calls']}")
    print(f"  cubin stats {cubin}")
    print("  XLA compiles over 0.05 s (start, seconds, function, thread):")
    for start, seconds, name, thread in XLA_COMPILES:
        if seconds > 0.05:
            print(f"    {start:7.2f}  {seconds:6.2f} s  {name:40s} {thread}")
    print("  timeline (s since the runner started; > 0.02 s):")
    for l, t, a, b in data["intervals"]:
        print(f"    {a:7.2f} - {b:7.2f}  {t:22s} {l}")
atexit.register(report)

example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "chemistry", "lj_clusters.py")
example = os.path.abspath(example)
sys.path.insert(0, os.path.dirname(example))
sys.argv = [example] + example_args
runpy.run_path(example, run_name="__main__")
