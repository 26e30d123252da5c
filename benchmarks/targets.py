"""The targets of shared/BENCHMARKS.md, each with what a results folder measured: one line per
target and problem size (launch-bound 10^6 and bandwidth-bound 2^26 are never mixed in one
geomean), from whichever suites the folder holds. A wrong result never meets a speed target."""
from __future__ import annotations

import math

STREAMING = {"stream_add", "stream_copy", "stream_mul", "stream_triad", "basic_daxpy", "basic_init3",
             "basic_muladdsub", "lcals_first_diff"}
REDUCTIONS = ("stream_dot", "basic_pi_reduce", "basic_trap_int", "basic_trap_int_rsqrt", "basic_reduce3_int")


def geomean(values) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _coverage(rows: list[dict], key: str) -> str:
    """'k of m kernels', naming the ones that failed (a failure is a row, never a silent drop)."""
    failed = [r.get("kernel") for r in rows if not isinstance(r.get(key), (int, float))]
    return f"{len(rows) - len(failed)} of {len(rows)} kernels" + (f"; missing: {', '.join(failed)}" if failed else "")


def meets(value, target: str) -> str | None:
    """'yes'/'NO' for a target written '<= 2' or '>= 4' (None where nothing was measured)."""
    if not isinstance(value, (int, float)):
        return None
    op, _, bound = target.partition(" ")
    try:
        limit = float(bound)
    except ValueError:
        return None
    ok = {"<=": value <= limit, ">=": value >= limit, "<": value < limit, ">": value > limit}.get(op)
    return None if ok is None else ("yes" if ok else "NO")


class Lines(list):
    def add(self, measure, value, target, ok) -> None:
        self.append({"measure": measure, "measured": value, "target": target,
                     "met": None if value is None or ok is None else ("yes" if ok(value) else "NO")})


def _rows(suites: dict, name: str) -> list[dict]:
    return list((suites.get(name) or {}).get("rows", []))


def primal_targets(out: Lines, suites: dict) -> None:
    raja_all = _rows(suites, "rajaperf")
    copy = next((r["GB/s"] for r in _rows(suites, "bandwidth") if "GB/s" in r), None)
    for n in sorted({r["n"] for r in raja_all if isinstance(r.get("n"), int)}):
        rows = [r for r in raja_all if r.get("n") == n]
        raja = [r for r in rows if "ours_ms" in r]
        out.add(f"n={n}: primal / hand-written CUDA, geomean ({_coverage(rows, 'cuda_ms')})",
                geomean(r["ours_ms"] / r["cuda_ms"] for r in raja if r.get("cuda_ms")), "<= 1.00", lambda v: v <= 1.0)
        if copy:
            fractions = [r["gbps_ours"] / copy for r in raja if r["kernel"] in STREAMING and r.get("gbps_ours")]
            out.add(f"n={n}: streaming kernels / copy bandwidth ({copy:.0f} GB/s), geomean", geomean(fractions),
                    ">= 0.90", lambda v: v >= 0.9)
        out.add(f"n={n}: bounds-checked / unchecked, geomean",
                geomean(r["ours_ms"] / r["unchecked_ms"] for r in raja if r.get("unchecked_ms")), "<= 1.05",
                lambda v: v <= 1.05)
        wrong = [r["kernel"] for r in raja if r.get("correct") is False or r.get("cuda_correct") is False]
        out.append({"measure": f"n={n}: kernels whose result (ours or CUDA's) differs from numpy",
                    "measured": ", ".join(wrong) or "none", "target": "none", "met": "NO" if wrong else "yes"})
        for r in raja:
            if r["kernel"] in REDUCTIONS and r.get("cuda_ms"):
                right = r.get("correct") is not False
                note = "" if right else " [ours WRONG]"
                out.add(f"n={n}: {r['kernel']}: tuned CUDA time / ours{note}", r["cuda_ms"] / r["ours_ms"], ">= 0.95",
                        lambda v, ok=right: ok and v >= 0.95)
                if r.get("jnp_ms"):
                    out.add(f"n={n}: {r['kernel']}: XLA time / ours{note}", r["jnp_ms"] / r["ours_ms"], "> 1",
                            lambda v, ok=right: ok and v > 1.0)


def derivative_targets(out: Lines, suites: dict) -> None:
    deriv_all = [r for r in _rows(suites, "derivatives") if "kernel" in r]
    for n in sorted({r["n"] for r in deriv_all if isinstance(r.get("n"), int)}):
        rows = [r for r in deriv_all if r.get("n") == n]
        for mode, name, target in (("vjp", "adjoint (lean: the JAX transpose rule's kernel)", 2.5),
                                   ("jvp", "JVP (lean: the JAX JVP rule's tangent call)", 1.5)):
            ratios = [r.get(f"{mode}_ratio") for r in rows if r.get(f"{mode}_ratio")]
            out.add(f"n={n}: {name} / primal, geomean ({_coverage(rows, f'{mode}_ratio')})",
                    geomean(ratios), f"<= {target}", lambda v, t=target: v <= t)
            if ratios:
                worst = max(rows, key=lambda r: r.get(f"{mode}_ratio") or 0)
                out.add(f"n={n}: worst {name} / primal ({worst['kernel']})", worst[f"{mode}_ratio"], "<= 4",
                        lambda v: v <= 4)
        for mode, name in (("vjp_full", "adjoint (full: default ado.vjp, primal outputs stored, seeds cleared)"),
                           ("jvp_full", "JVP (full: default ado.jvp, primal outputs stored)")):
            out.add(f"n={n}: {name} / primal, geomean",
                    geomean(r[f"{mode}_ratio"] for r in rows if r.get(f"{mode}_ratio")), "(no target)", None)
        for mode in ("vjp", "jvp"):
            out.add(f"n={n}: {mode} (lean) array bytes / primal array bytes, geomean "
                    "(the ratio if both ran at one bandwidth)",
                    geomean(r[f"{mode}_bytes_ratio"] for r in rows if r.get(f"{mode}_bytes_ratio")), "(no target)", None)
        for mode, what in (("jvp", "jax.jvp"), ("vjp", "jax.vjp")):
            out.add(f"n={n}: our full {mode} kernel / {what} of the jnp version, geomean",
                    geomean(r[f"{mode}_full_ms"] / r[f"jax_{mode}_ms"] for r in rows
                            if r.get(f"{mode}_full_ms") and r.get(f"jax_{mode}_ms")), "(no target)", None)


def overhead_targets(out: Lines, suites: dict) -> None:
    rows = _rows(suites, "overheads")
    for r in rows:
        m = r.get("measure", "")
        if not m.startswith("compile") or "nvptx" not in m or "ms" not in r:   # the targets are for PTX
            continue
        if "cold" in m:
            out.add(m + " [s]", r["ms"] / 1e3, "<= 1 s", lambda v: v <= 1.0)
        elif "warm" in m:
            out.add(m + " [ms]", r["ms"], "<= 20 ms", lambda v: v <= 20)
    calls = {r["measure"]: r["us"] for r in rows if "us" in r}
    ours = [v for k, v in calls.items() if "adoffload" in k]
    xla = [v for k, v in calls.items() if "XLA" in k]
    if ours and xla:
        out.add("tiny custom call - tiny XLA op, per call [us]", ours[0] - xla[0], "<= +2 us", lambda v: v <= 2.0)


def targets(suites: dict) -> list[dict]:
    out = Lines()
    primal_targets(out, suites)
    derivative_targets(out, suites)
    overhead_targets(out, suites)
    for name in ("chemistry", "user_kernels"):
        if name in suites:
            from .suites import load_suite
            module = load_suite(name)
            if hasattr(module, "targets"):
                out.extend(module.targets(_rows(suites, name)))
    return out
