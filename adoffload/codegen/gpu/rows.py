"""Row launches of rank-2 and rank-3 grids on NVPTX: the hardware's block indices are the tids.

A GPU entry launched 1-D finds its tids by dividing the linear thread id by the grid's extents
(abi._gpu_tids): two integer divisions per thread for a rank-3 grid. A kernel that does little
per element pays for them: RAJAPerf's ``basic_nested_init`` (one store per thread) ran at 1.5x
the hand-written CUDA time on the H200 (benchmarks/results/2026-12-01-h200-run2), which launches
``(ceil(ni/256), nj, nk)`` blocks and reads ``j, k`` from ``blockIdx.y/z``.

The contract both sides share (the entry reads it from the launch shape, so a launcher that
does not know it stays correct):

* **row launch** (``gridDim.z > 1``): for grid ``(g0, g1, g2)`` the launch has
  ``(ceil(g2 / block), g1, g0)`` blocks of ``block`` threads, and thread ``(x, y, z)`` runs tids
  ``(ctaid.z, ctaid.y, ctaid.x * ntid.x + tid.x)``; for grid ``(g0, g1)`` it has
  ``(ceil(g1 / block), 1, g0)`` blocks and runs ``(ctaid.z, ctaid.x * ntid.x + tid.x)``. Threads
  outside the grid return.
* **linear launch** (``gridDim.z == 1``; runtime/gpu.py ``launch_grid`` never uses z): the
  linear id is decomposed as before.

``row_blocks`` is the launch side's policy: a row launch only where ``g0 >= 2`` (z must say
so), the extents fit the hardware's y/z limits, and rounding each row up to whole blocks idles at
most 1/8 of the threads (a short last axis would waste most of every block). Entries that can
take a row launch say so in their PTX (``PTX_ROW_LAUNCH_LINE``, read by ``launches_rows``): an
artifact compiled before this existed is never launched this way.
"""
from __future__ import annotations

from llvmlite import ir

_I32, _I64 = ir.IntType(32), ir.IntType(64)

ROW_LAUNCH_MARK = "adoffload.row_launch"        # named metadata of entries that accept row launches
PTX_ROW_LAUNCH_LINE = "// adoffload: row launch (rank-2/3 grid: blocks (ceil(last/block), g1, g0) are accepted)\n"
MAX_GRID_YZ = 65535
MAX_ROW = 2**31 - 1
# at most this fraction of a row launch's threads may fall past the end of their row
MAX_IDLE_FRACTION = 1 / 8


def launches_rows(artifact) -> bool:
    """Whether a compiled GPU artifact's entry accepts row launches (its PTX says so)."""
    return isinstance(artifact, str) and artifact.startswith(PTX_ROW_LAUNCH_LINE)


def row_blocks(grid, block: int) -> tuple[int, int, int] | None:
    """``(blocks_x, blocks_y, blocks_z)`` of a row launch of ``grid`` in blocks of ``block``
    threads, or None where the linear launch is the better (or the only possible) one."""
    grid = tuple(int(g) for g in grid)
    block = int(block)
    if len(grid) not in (2, 3) or block < 1:
        return None
    first, last = grid[0], grid[-1]
    middle = grid[1] if len(grid) == 3 else 1
    if min(grid) < 1 or first < 2 or first > MAX_GRID_YZ or middle > MAX_GRID_YZ or last > MAX_ROW:
        return None
    blocks_x = -(-last // block)
    if blocks_x * block - last > MAX_IDLE_FRACTION * blocks_x * block:
        return None
    return blocks_x, middle, first


def _sreg(m: ir.Module, b: ir.IRBuilder, name: str) -> ir.Value:
    symbol = f"llvm.nvvm.read.ptx.sreg.{name}"
    fn = m.globals.get(symbol) or ir.Function(m, ir.FunctionType(_I32, []), name=symbol)
    return b.zext(b.call(fn, []), _I64)


def launch_indices_nvptx(m: ir.Module, b: ir.IRBuilder) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """``(ctaid.x * ntid.x + tid.x, ctaid.y, ctaid.z, nctaid.z)`` as i64."""
    x = b.add(b.mul(_sreg(m, b, "ctaid.x"), _sreg(m, b, "ntid.x"), flags=("nuw", "nsw")), _sreg(m, b, "tid.x"),
              flags=("nuw", "nsw"))
    return x, _sreg(m, b, "ctaid.y"), _sreg(m, b, "ctaid.z"), _sreg(m, b, "nctaid.z")


LAUNCH_INDICES = {"nvptx": launch_indices_nvptx}


def emit_rows_or_linear(m: ir.Module, b: ir.IRBuilder, target: str, grid: list, linear: ir.Value, total: ir.Value,
                        linear_tids, run) -> None:
    """Call ``run(b, tids)`` once for the thread's tids, taken from the launch shape: a row
    launch (``nctaid.z > 1``) or a linear one (``linear_tids(b)`` decomposes ``linear``, emitted
    only where ``linear < total``, so no division by a zero extent runs)."""
    x, y, z, blocks_z = LAUNCH_INDICES[target](m, b)
    fn = b.function
    rows_block, linear_block = fn.append_basic_block("rows"), fn.append_basic_block("linear")
    decompose, call, done = (fn.append_basic_block(n) for n in ("linear.tids", "call", "done"))
    b.cbranch(b.icmp_unsigned(">", blocks_z, _I64(1)), rows_block, linear_block)

    b.position_at_end(rows_block)
    rank = len(grid)
    row_tids = [z, y, x] if rank == 3 else [z, x]
    inside = b.and_(b.icmp_unsigned("<", z, grid[0]), b.icmp_unsigned("<", x, grid[-1]))
    inside = b.and_(inside, b.icmp_unsigned("<", y, grid[1]) if rank == 3 else b.icmp_unsigned("==", y, _I64(0)))
    b.cbranch(inside, call, done)

    b.position_at_end(linear_block)
    b.cbranch(b.icmp_unsigned("<", linear, total), decompose, done)
    b.position_at_end(decompose)
    tids = linear_tids(b)
    decomposed = b.block
    b.branch(call)

    b.position_at_end(call)
    merged = []
    for row_tid, tid in zip(row_tids, tids):
        phi = b.phi(_I64)
        phi.add_incoming(row_tid, rows_block)
        phi.add_incoming(tid, decomposed)
        merged.append(phi)
    run(b, merged)
    b.branch(done)
    b.position_at_end(done)
