"""Where the time of one force-matching gradient call goes: a jax.profiler trace, summarised.

The chemistry benchmark's force-matching gradient (benchmarks/chemistry.py, ``force_loss``) at one
size, jitted and warmed up, then ``--calls`` calls under ``jax.profiler.trace`` with a Perfetto
trace; the summary lists every device-side event (kernels, copies, memsets) by name with its total
and per-call time, and the host-side span per call. Issue #12: at 10,976 atoms ours is 2.5x faster
than jax-md against a 3x target; this says whether the kernel or the calls around it cost the time.

    python benchmarks/fm_trace.py --out /tmp/fm_trace [--atoms 10976] [--calls 20]
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def summarise(trace: dict, calls: int) -> list[str]:
    """Device events (thread names mentioning a stream or GPU) summed by name, per call."""
    events = trace.get("traceEvents", [])
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            names[(e.get("pid"), e.get("tid") if e["name"] == "thread_name" else None)] = e["args"]["name"]
    device = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.get("ph") != "X":
            continue
        where = names.get((e.get("pid"), None), "") + " / " + names.get((e.get("pid"), e.get("tid")), "")
        if "GPU" in where or "Stream" in where or "/device:" in where:
            entry = device[e["name"][:90]]
            entry[0] += float(e.get("dur", 0.0))
            entry[1] += 1
    lines = [f"{'device event':<92} {'count':>6} {'us/call':>9}"]
    total = 0.0
    for name, (dur, count) in sorted(device.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"{name:<92} {count:>6} {dur / calls:>9.2f}")
        total += dur
    lines.append(f"{'all device events':<92} {'':>6} {total / calls:>9.2f}")
    if not device:          # say what the trace holds instead
        lines.append("processes/threads in the trace: " + "; ".join(sorted(set(names.values())))[:600])
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--atoms", type=int, default=10976)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    import jax
    jax.config.update("jax_enable_x64", True)
    import chemistry as C
    from harness import time_jax
    device = jax.devices(args.device)[0]
    system = C.System(args.atoms, device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for backend in ("adoffload",):
        ff = system.forcefield(backend)
        gradient = jax.jit(jax.grad(C.force_loss(ff, system.pos, system.nl.neighbors)))
        params = jax.device_put({ff.terms[0].name: dict(C.FIT_PARAMS)}, device)
        energy_forces = jax.jit(ff.energy_and_forces)
        for name, fn, fargs in (("fit", gradient, (params,)), ("ef", energy_forces, (system.pos, system.nl.neighbors))):
            jax.block_until_ready(fn(*fargs))
            t = time_jax(fn, *fargs, reps=5)
            print(f"{backend} {name}: {t.median_ms * 1e3:.1f} us per call (median of 5 batches)")
            where = out / f"{backend}_{name}"
            with jax.profiler.trace(str(where), create_perfetto_trace=True):
                for _ in range(args.calls):
                    result = fn(*fargs)
                jax.block_until_ready(result)
            files = sorted(where.rglob("*.json.gz"))
            if not files:
                print("  no Perfetto trace written:", [str(p.relative_to(out)) for p in where.rglob("*")][:8])
                continue
            with gzip.open(files[-1], "rt") as f:
                trace = json.load(f)
            for line in summarise(trace, args.calls):
                print("  " + line)
            for p in where.rglob("*"):
                if p.is_file() and p.suffix != ".gz":
                    p.unlink()          # keep the small Perfetto file only
        print("  --- the other side for comparison: jax-md's gradient is timed by benchmarks/chemistry.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
