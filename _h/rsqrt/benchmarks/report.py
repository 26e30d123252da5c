"""Turn benchmark rows into report.md (tables + targets from shared/BENCHMARKS.md) and a plot."""
from __future__ import annotations

import math
from pathlib import Path

STREAMING = {"stream_add", "stream_copy", "stream_mul", "stream_triad", "basic_daxpy", "basic_init3",
             "basic_muladdsub", "lcals_first_diff"}


def geomean(values) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


REDUCTIONS = ("stream_dot", "basic_pi_reduce", "basic_trap_int", "basic_trap_int_rsqrt", "basic_reduce3_int")


def _coverage(rows: list[dict], key: str) -> str:
    """'k of m kernels', naming the ones that failed (a failure is a row, never a silent drop)."""
    failed = [r["kernel"] for r in rows if not isinstance(r.get(key), (int, float))]
    return f"{len(rows) - len(failed)} of {len(rows)} kernels" + (f"; missing: {', '.join(failed)}" if failed else "")


def summary(results: dict) -> list[dict]:
    """The BENCHMARKS.md and issue-12 targets, each with what this run measured, one size at a
    time (launch-bound 10^6 and bandwidth-bound 2^26 are never mixed in one geomean)."""
    raja_all = results.get("rajaperf", [])
    sizes = sorted({r["n"] for r in raja_all if "n" in r})
    copy = next((r["GB/s"] for r in results.get("bandwidth", []) if "GB/s" in r), None)
    out = []

    def add(measure, value, target, ok):
        out.append({"measure": measure, "measured": value, "target": target,
                    "met": None if value is None or ok is None else ("yes" if ok(value) else "NO")})
    for n in sizes:
        rows = [r for r in raja_all if r.get("n") == n]
        raja = [r for r in rows if "ours_ms" in r]
        add(f"n={n}: primal / hand-written CUDA, geomean ({_coverage(rows, 'cuda_ms')})",
            geomean(r["ours_ms"] / r["cuda_ms"] for r in raja if r.get("cuda_ms")), "<= 1.00", lambda v: v <= 1.0)
        if copy:
            fractions = [r["gbps_ours"] / copy for r in raja if r["kernel"] in STREAMING]
            add(f"n={n}: streaming kernels / copy bandwidth ({copy:.0f} GB/s), geomean", geomean(fractions),
                ">= 0.90", lambda v: v >= 0.9)
        for mode, name, target in (("vjp", "adjoint (lean: the JAX transpose rule's kernel)", 2.5),
                                   ("jvp", "JVP (lean: the JAX JVP rule's tangent call)", 1.5)):
            ratios = [r.get(f"{mode}_ratio") for r in raja if r.get(f"{mode}_ratio")]
            add(f"n={n}: {name} / primal, geomean ({_coverage([r for r in rows if _has_wrt(r) or 'error' in r], f'{mode}_ratio')})",
                geomean(ratios), f"<= {target}", lambda v, t=target: v <= t)
            if ratios:
                worst = max(raja, key=lambda r: r.get(f"{mode}_ratio") or 0)
                add(f"n={n}: worst {name} / primal ({worst['kernel']})", worst[f"{mode}_ratio"], "<= 4",
                    lambda v: v <= 4)
        for mode, name in (("vjp_full", "adjoint (full: default ado.vjp, primal outputs stored, seeds cleared)"),
                           ("jvp_full", "JVP (full: default ado.jvp, primal outputs stored)")):
            add(f"n={n}: {name} / primal, geomean",
                geomean(r[f"{mode}_ratio"] for r in raja if r.get(f"{mode}_ratio")), "(no target)", None)
        for mode in ("vjp", "jvp"):
            add(f"n={n}: {mode} (lean) array bytes / primal array bytes, geomean "
                "(the ratio if both ran at one bandwidth)",
                geomean(r[f"{mode}_bytes_ratio"] for r in raja if r.get(f"{mode}_bytes_ratio")), "(no target)", None)
        for mode, what in (("jvp", "jax.jvp"), ("vjp", "jax.vjp")):     # BENCHMARKS.md item 2: no target
            # the full kernels, which compute the primal too, as jax.jvp / jax.vjp of the jnp version do
            add(f"n={n}: our full {mode} kernel / {what} of the jnp version, geomean",
                geomean(r[f"{mode}_full_ms"] / r[f"jax_{mode}_ms"] for r in raja
                        if r.get(f"{mode}_full_ms") and r.get(f"jax_{mode}_ms")),
                "(no target)", None)
        add(f"n={n}: bounds-checked / unchecked, geomean",
            geomean(r["ours_ms"] / r["unchecked_ms"] for r in raja if r.get("unchecked_ms")), "<= 1.05",
            lambda v: v <= 1.05)
        wrong = [r["kernel"] for r in raja if r.get("correct") is False or r.get("cuda_correct") is False]
        out.append({"measure": f"n={n}: kernels whose result (ours or CUDA's) differs from numpy",
                    "measured": ", ".join(wrong) or "none", "target": "none", "met": "NO" if wrong else "yes"})
        for r in raja:
            if r["kernel"] in REDUCTIONS and r.get("cuda_ms"):
                right = r.get("correct") is not False     # a wrong result never meets a speed target
                note = "" if right else " [ours WRONG]"
                add(f"n={n}: {r['kernel']}: tuned CUDA time / ours{note}", r["cuda_ms"] / r["ours_ms"], ">= 0.95",
                    lambda v, ok=right: ok and v >= 0.95)
                if r.get("jnp_ms"):
                    add(f"n={n}: {r['kernel']}: XLA time / ours{note}", r["jnp_ms"] / r["ours_ms"], "> 1",
                        lambda v, ok=right: ok and v > 1.0)
    for r in results.get("overheads", []):
        m = r.get("measure", "")
        if not m.startswith("compile") or "nvptx" not in m:   # the targets are for compiling to PTX
            continue
        if "cold" in m:
            add(m + " [s]", r["ms"] / 1e3, "<= 1 s", lambda v: v <= 1.0)
        elif "warm" in m:
            add(m + " [ms]", r["ms"], "<= 20 ms", lambda v: v <= 20)
    calls = {r["measure"]: r["us"] for r in results.get("overheads", []) if "us" in r}
    ours = [v for k, v in calls.items() if "adoffload" in k]
    xla = [v for k, v in calls.items() if "XLA" in k]
    if ours and xla:
        add("tiny custom call - tiny XLA op, per call [us]", ours[0] - xla[0], "<= +2 us", lambda v: v <= 2.0)
    return out


def _has_wrt(row: dict) -> bool:
    """Whether a RAJAPerf row's kernel has derivatives (rows with a jvp/vjp result or error)."""
    return any(k.startswith(("jvp", "vjp")) for k in row)


RAJAPERF_COLUMNS = (
    "Derivative columns: `jvp_*` times the JAX JVP rule's tangent call, `ado.jvp(k, wrt, primal_outputs=False)` "
    "(primal outputs not stored; the rule runs it after the primal call, so `jax.jvp` costs 1 + jvp_ratio "
    "primals); `vjp_*` times the JAX transpose rule's adjoint, `ado.vjp(k, wrt, primal_outputs=False)` (primal "
    "outputs not stored, once-stored seeds read without clearing). `jvp_full_ratio`/`vjp_full_ratio` time the "
    "default `ado.jvp`/`ado.vjp` kernels (primal outputs stored, seeds cleared). `*_bytes_ratio`: bytes of the "
    "arrays the derivative's code reads plus those it writes, each once, over the same for the primal: the time "
    "ratio a kernel running at the primal's bandwidth would reach. Gradient arrays are accumulated (`+=`), so they "
    "count as read and written.")


def write_report(out: Path, env: dict, results: dict) -> None:
    parts = ["# adoffload benchmark report", "", "Environment: " + ", ".join(f"{k}={v}" for k, v in env.items()), "",
             "All ratios are measured in this run, on this machine (shared/BENCHMARKS.md).", "",
             "## Targets", "", table(summary(results), ["measure", "measured", "target", "met"]), ""]
    columns = {
        "rajaperf": ["kernel", "n", "correct", "cuda_correct", "ours_ms", "ours_iqr_ms", "unchecked_ms", "cuda_ms",
                     "cuda_iqr_ms", "jnp_ms", "jnp_iqr_ms", "gbps_ours", "gbps_cuda", "jvp_ratio", "vjp_ratio",
                     "jvp_ms", "vjp_ms", "jvp_full_ms", "jax_jvp_ms", "vjp_full_ms", "jax_vjp_ms", "jvp_full_ratio",
                     "vjp_full_ratio", "jvp_bytes_ratio", "vjp_bytes_ratio", "k", "grid_stride", "threads", "cuda_blocks", "jvp_k", "vjp_k", "reps",
                     "checked", "wall_s", "error", "jvp_error", "vjp_error", "jvp_full_error", "vjp_full_error",
                     "jax_jvp_error", "jax_vjp_error"],
    }
    for name, rows in results.items():
        cols = columns.get(name) or sorted({k for r in rows for k in r})
        sizes = sorted({r["n"] for r in rows if "n" in r}) if name == "rajaperf" else []
        if sizes:       # one table per size: launch-bound and bandwidth-bound rows never share one
            parts += [f"## {name}", "", RAJAPERF_COLUMNS, ""]
            for n in sizes:
                parts += [f"### n={n}", "", table([r for r in rows if r.get("n") == n], cols), ""]
            rest = [r for r in rows if "n" not in r]
            parts += [table(rest, sorted({k for r in rest for k in r})), ""] if rest else []
        else:
            parts += [f"## {name}", "", table(rows, cols), ""]
    (out / "report.md").write_text("\n".join(parts))
    _plot(out, results.get("rajaperf", []))


def _plot(out: Path, rows: list[dict]) -> None:
    rows = [r for r in rows if r.get("cuda_ms") and r.get("ours_ms")]
    if not rows:
        return
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot written")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['kernel']}\nn={r['n']:.0e}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.45), 4.5))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["cuda_ms"] / r["ours_ms"] for r in rows], 0.4, label="CUDA time / ours")
    ax.bar([x + 0.2 for x in xs], [r["jnp_ms"] / r["ours_ms"] if r.get("jnp_ms") else 0 for r in rows], 0.4,
           label="jax.numpy time / ours")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(xs), labels, rotation=90, fontsize=6)
    ax.set_ylabel("speed-up of adoffload (>1: ours faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "rajaperf.png", dpi=120)
