"""Device-free proxy for the RAJAPerf comparison: our PTX against nvcc's, kernel by kernel.

For every case of rajaperf_kernels.py, compiles our kernel the way benchmarks/rajaperf.py
launches it (sm_90, the bounds facts a 2^20-element launch proves, noalias) and the
hand-written CUDA baseline (``nvcc -O3 -arch=sm_90 -ptx cuda/rajaperf.cu``), counts the
static PTX instructions of each entry by class, and adds ptxas's register/spill report.

    python benchmarks/ptx_compare.py [--out benchmarks/results/ptx_compare.md] [--unchecked]

Static counts are not times: the point is to see where our code does more work per element
(extra 64-bit arithmetic, plain vs non-coherent loads, per-thread vs per-block atomics).
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

# Instruction classes: first matching rule wins (opcode prefix regex -> class).
CLASSES = [
    (r"ld\.global\.nc", "ld.nc"),
    (r"ld\.global", "ld.global"),
    (r"st\.global", "st.global"),
    (r"(atom|red)\.global", "atomic"),
    (r"(ld|st|atom)\.shared", "shared"),
    (r"shfl", "shfl"),
    (r"bar\.", "barrier"),
    (r"ld\.param", "ld.param"),
    (r"(add|sub|mul|fma|div|sqrt|rcp|neg|abs|min|max|ex2|lg2)\.(rn\.|rz\.|approx\.|full\.|ftz\.)*f(32|64)", "float"),
    (r"(setp|selp)", "compare"),
    (r"(bra|ret|@)", "branch"),
    (r"(cvt|cvta|mov)", "move/convert"),
    (r"[a-z]+(\.[a-z0-9]+)*\.(s|u|b)64", "int64"),
    (r"[a-z]+(\.[a-z0-9]+)*\.(s|u|b)(32|16)", "int32"),
]
COLUMNS = ["ld.global", "ld.nc", "st.global", "atomic", "shfl", "barrier", "float", "int64", "int32",
           "compare", "branch", "total"]


def classify(line: str) -> str | None:
    text = line.strip()
    if not text or text.startswith(("//", ".", "{", "}", "$")) or text.endswith(":"):
        return None
    if text.startswith("@"):                   # predicated instruction: classify what it does
        text = text.split(None, 1)[1] if " " in text else text
        if text.startswith("bra"):
            return "branch"
    for pattern, name in CLASSES:
        if re.match(pattern, text):
            return name
    return "other"


def entries(ptx: str) -> dict[str, str]:
    """Entry name -> body text, for every ``.entry`` in a PTX file."""
    out = {}
    for m in re.finditer(r"\.entry\s+([\w$]+)\s*\((.*?)\)\s*\{(.*?)\n\}", ptx, re.S):
        out[m.group(1)] = m.group(3)
    return out


def counts(body: str) -> Counter:
    c = Counter()
    for line in body.splitlines():
        kind = classify(line)
        if kind is not None:
            c[kind] += 1
            c["total"] += 1
        if re.search(r"\.v[24]\.", line):
            c["vector"] += 1
    return c


def ptxas_report(ptx: str) -> dict[str, str]:
    """Entry -> 'R regs, S spill' from ptxas -v."""
    from adoffload.codegen.gpu.tools import find_ptxas
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        proc = subprocess.run([str(find_ptxas()), "-arch=sm_90", "-v", "-o", str(Path(tmp) / "k.cubin"), str(src)],
                              capture_output=True, text=True)
    report, current = {}, None
    for line in (proc.stdout + proc.stderr).splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            report[current] = int(m.group(1))
    return report


def our_ptx(case, checked: bool, noalias: bool) -> tuple[str, str]:
    import adoffload as ado
    from adoffload.kernels.launch import proven_facts
    kernel = case.kernel if checked else ado.kernel(bounds_check=False)(case.kernel.pyfunc)
    n = 1 << 20
    host = case.make(n, np.random.default_rng(0))
    grid = case.grid(n)
    values = [host[p.name] for p in kernel.signature.params]
    options = {"noalias": True} if noalias else {}
    compiled = kernel.compiled("nvptx", arch="sm_90", proven=proven_facts(kernel, values, grid), **options)
    return compiled.ptx, compiled.entry_name


def nvcc_ptx() -> str | None:
    nvcc = shutil.which("nvcc") or "/usr/local/bin/nvcc"
    if not Path(nvcc).exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rajaperf.ptx"
        subprocess.run([nvcc, "-O3", "-arch=sm_90", "-ptx", "-o", str(out), str(HERE / "cuda" / "rajaperf.cu")],
                       check=True)
        return out.read_text()


def table(checked: bool = True, noalias: bool = True) -> str:
    from rajaperf_kernels import CASES
    cuda = nvcc_ptx()
    cuda_entries = entries(cuda) if cuda else {}
    cuda_regs = ptxas_report(cuda) if cuda else {}
    head = "| kernel | who | " + " | ".join(COLUMNS) + " | vec | regs |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 4)]
    ratios = []
    for case in CASES:
        ptx, entry = our_ptx(case, checked, noalias)
        ours = counts(entries(ptx)[entry])
        regs = ptxas_report(ptx).get(entry, "?")
        rows = [("ours", ours, regs)]
        if case.name in cuda_entries:
            theirs = counts(cuda_entries[case.name])
            rows.append(("nvcc", theirs, cuda_regs.get(case.name, "?")))
            ratios.append(ours["total"] / max(theirs["total"], 1))
        for who, c, r in rows:
            lines.append(f"| {case.name} | {who} | " + " | ".join(str(c[k]) for k in COLUMNS)
                         + f" | {c['vector']} | {r} |")
    if ratios:
        geo = float(np.exp(np.mean(np.log(ratios))))
        lines.append("")
        lines.append(f"Static instruction count ours/nvcc, geomean over {len(ratios)} kernels: {geo:.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the markdown report here")
    ap.add_argument("--unchecked", action="store_true", help="compile ours without bounds checks")
    ap.add_argument("--no-noalias", action="store_true", help="compile ours without noalias")
    args = ap.parse_args(argv)
    noalias = not args.no_noalias
    variants = [False] if args.unchecked else [True, False]
    sections = [f"## Ours {'checked' if checked else 'unchecked (bounds_check=False)'}, "
                f"{'noalias' if noalias else 'no noalias'}\n\n" + table(checked=checked, noalias=noalias)
                for checked in variants]
    text = ("# PTX comparison: ours vs nvcc -O3 (sm_90), static instruction counts per entry\n\n"
            "Produced by `python benchmarks/ptx_compare.py`; classes: ld.global (coherent loads), "
            "ld.nc (non-coherent/read-only loads), atomic (atom/red global), float (f32/f64 arithmetic), "
            "int64/int32 (integer ALU by width), compare (setp/selp), branch (bra/ret); vec = "
            "vector (.v2/.v4) memory instructions; regs from ptxas -v. Static counts include cold "
            "paths: our bounds-check failure/status-record code and the reductions' fallback for blocks "
            "that are not whole warps, so compare the unchecked table for the per-element hot path.\n\n"
            + "\n\n".join(sections) + "\n")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
