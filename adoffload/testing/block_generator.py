"""Random block kernels (shared memory, barriers, warp and block exchanges) as Python source text.

Block kernels are the most intricate part of the AD engine (shadow shared memory, barriers
replayed backwards, refilled tiles, transposed exchanges, the host running a block as phases cut
at barriers), so random ones are checked like generator.py's one-thread kernels are.

Every kernel has the same parameters (``PARAMETERS``, rank 1 or 2 by the block's rank) and runs as
**phases** separated by ``ado.sync_threads()`` at block-uniform points (top level, or in loops with
block-uniform trip counts). Races are avoided by construction: within a phase a shared array is
either written (each thread one slot of a permutation of the slots: own, neighbour, reversed,
strided, transposed) or read (any slot, a neighbour, a reduction over the tile), never both
(except a thread updating its own slot); a phase reads only arrays a previous phase filled
completely. Loops holding barriers follow the tiled-matmul pattern (fill a tile from global
memory, barrier, use it, barrier). Warp and block operations sit at block-uniform points only.
Magnitudes stay bounded: reductions are means, loop updates mix through ``tanh``.

``rng`` is a ``random.Random`` (or anything with ``randint``, ``choice``, ``random``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .generator import BINARY, FLOAT_CONSTANTS, UNARY

KERNEL_NAME = "block_fuzzed"
BLOCKS = (32, 64, 128, (8, 8), (4, 32), (16, 16))
WARP = 32                                  # the host's warp size (warp ops need whole warps: all blocks have them)
# generate(warp=64): kernels for AMD's 64-lane wavefronts (the cpu:wave64 host), blocks of whole wavefronts
DIFFERENTIABLE_INPUTS = ("a", "x", "w", "z")
FLOAT_OUTPUTS = ("out", "acc", "z")
MAX_ARRAYS = 2


def parameters(rank: int) -> str:
    r = "" if rank == 1 else f", {rank}"
    return (f"a: ado.f64, x: ado.In[ado.f64{r}], w: ado.In[ado.f64{r}], z: ado.InOut[ado.f64{r}], "
            f"out: ado.Out[ado.f64{r}], acc: ado.Out[ado.f64]")


@dataclass(frozen=True)
class GeneratedBlockKernel:
    """A random block kernel: its source (decorated with ``@ado.kernel(block=...)``) and its block."""
    source: str
    block: tuple[int, ...]
    name: str = KERNEL_NAME

    @property
    def threads(self) -> int:
        total = 1
        for extent in self.block:
            total *= extent
        return total


@dataclass
class _Shared:
    """One shared array: its name, shape, and whether a previous phase filled every slot."""
    name: str
    shape: tuple[int, ...]
    filled: bool = False


class _Writer:
    def __init__(self, rng, block: tuple[int, ...], max_depth: int, warp: int = WARP):
        self.rng, self.block, self.max_depth, self.warp = rng, block, max_depth, warp
        self.T = block[0] * (block[1] if len(block) == 2 else 1)
        self.lines: list[str] = []
        self.floats = ["f0"]
        self.ints = ["t", "lane"] + (["ti", "tj"] if len(block) == 2 else [])
        self.loop_vars: list[str] = []       # counters of enclosing loops (uniform across the block)
        self.counter = 0
        self.readable: list[_Shared] = []    # arrays the current phase may read
        self.arrays: list[_Shared] = []

    # ---- helpers ---------------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, level: int, text: str) -> None:
        self.lines.append("    " * level + text)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    @property
    def rank(self) -> int:
        return len(self.block)

    @property
    def own(self) -> str:
        return "i" if self.rank == 1 else "i0, i1"

    def global_index(self) -> str:
        """Any element of a global array (reads of the In arrays x, w only)."""
        if self.rank == 1:
            return f"({self.iexpr(1)}) % n"
        return f"({self.iexpr(1)}) % n0, ({self.iexpr(1)}) % n1"

    def element(self, array: _Shared, linear: str) -> str:
        """``array`` at the linear slot ``linear`` (an expression in [0, T), given as a name or a
        parenthesized expression)."""
        if len(array.shape) == 1:
            return f"{array.name}[{linear}]"
        cols = array.shape[1]
        return f"{array.name}[{linear} // {cols}, {linear} % {cols}]"

    # ---- slots of a shared array: permutations of the block's threads -----------------------
    def write_slot(self, array: _Shared) -> str:
        """The slot this thread writes, by a pattern that is a permutation of the slots."""
        T = self.T
        if self.rank == 2 and len(array.shape) == 2:
            B0, B1 = self.block
            patterns = ["S[ti, tj]", f"S[ti, (tj + 1) % {B1}]", f"S[{B0 - 1} - ti, {B1 - 1} - tj]",
                        f"S[(ti + 1) % {B0}, tj]"]
            if B0 == B1:
                patterns.append("S[tj, ti]")
            return self.rng.choice(patterns).replace("S", array.name)
        patterns = ["t", f"((t + 1) % {T})", f"({T - 1} - t)", f"((t + {self.rng.randint(2, T - 1)}) % {T})"]
        if len(array.shape) == 1:       # (the race check cannot prove this one through // and % of a 2-D tile)
            patterns.append(f"((t % 2) * {T // 2} + t // 2)")
        return self.element(array, self.rng.choice(patterns))

    def read_slot(self, array: _Shared) -> str:
        T = self.T
        kind = self.rng.randint(0, 4)
        if kind == 0:
            linear = "t"
        elif kind == 1:
            linear = f"(({self.rng.choice(['t', 'lane'])} + {self.rng.randint(1, T - 1)}) % {T})"
        elif kind == 2:
            linear = f"({T - 1} - t)"
        elif kind == 3:
            linear = f"({self.rng.randint(0, T - 1)})"
        else:
            linear = f"(({self.iexpr(1)}) % {T})"
        return self.element(array, linear)

    # ---- expressions ------------------------------------------------------------------------
    def fexpr(self, depth: int) -> str:
        if depth <= 0 or self.chance(0.3):
            return self.fleaf()
        kind = self.rng.randint(0, 9)
        if kind <= 3:
            return self.rng.choice(UNARY).format(self.fexpr(depth - 1))
        if kind <= 8:
            return self.rng.choice(BINARY).format(self.fexpr(depth - 1), self.fexpr(depth - 1))
        return f"({self.fexpr(depth - 1)}) if {self.cond()} else ({self.fexpr(depth - 1)})"

    def fleaf(self) -> str:
        kind = self.rng.randint(0, 11)
        if kind <= 2:
            return self.rng.choice(self.floats)
        if kind == 3:
            return self.rng.choice(FLOAT_CONSTANTS)
        if kind == 4:
            return f"{self.rng.choice(('x', 'w'))}[{self.global_index()}]"
        if kind == 5:
            return f"0.125 * float({self.ileaf()})"
        if kind <= 8 and self.readable:
            return self.read_slot(self.rng.choice(self.readable))
        return self.rng.choice(("a", f"x[{self.own}]", f"w[{self.own}]", f"z[{self.own}]"))

    def ileaf(self) -> str:
        kind = self.rng.randint(0, 5)
        if kind <= 2:
            return self.rng.choice(self.ints + self.loop_vars * 2)
        if kind == 3:
            return str(self.rng.randint(0, 7))
        return self.rng.choice(("b", "t", "lane") if self.rank == 1 else ("b0", "b1", "t", "lane"))

    def iexpr(self, depth: int) -> str:
        if depth <= 0 or self.chance(0.4):
            return self.ileaf()
        return self.rng.choice(("({0}) + ({1})", "({0}) * ({1})", "ado.max({0}, {1})", "({0}) // 2")).format(
            self.iexpr(depth - 1), self.iexpr(depth - 1))

    def cond(self) -> str:
        kind = self.rng.randint(0, 3)
        if kind == 0:
            return f"({self.fexpr(1)}) > {self.rng.choice(FLOAT_CONSTANTS)}"
        if kind == 1:
            return f"t % 2 == {self.rng.randint(0, 1)}"
        if kind == 2:
            return f"t < {self.rng.randint(1, self.T - 1)}"
        return f"lane < {self.rng.randint(1, self.warp - 1)}"

    # ---- statements of a phase (no barrier inside) ------------------------------------------
    def exchange(self, level: int) -> None:
        """A warp or block exchange into a new float (only at block-uniform points)."""
        T = self.T
        e = self.fexpr(self.max_depth - 1)
        kind = self.rng.choice(("warp_sum", "warp_max", "shuffle", "shuffle_down", "block_sum", "block_max"))
        if kind == "warp_sum":
            text = f"ado.warp_sum({e}) * {1.0 / self.warp!r}"
        elif kind == "block_sum":
            text = f"ado.block_sum({e}) * {1.0 / T!r}"
        elif kind in ("warp_max", "block_max"):
            text = f"ado.{kind}({e})"
        elif kind == "shuffle":
            lane = self.rng.choice(["lane // 2 + 7", f"{self.warp - 1} - lane", str(self.rng.randint(0, self.warp - 1)),
                                    f"lane + {self.rng.randint(1, self.warp - 1)}", "t * 3"])
            text = f"ado.shuffle({e}, {lane})"
        else:
            delta = self.rng.choice([str(self.rng.randint(1, 16)), "1 + b % 3" if self.rank == 1 else "1 + b0 % 3"])
            text = f"ado.shuffle_down({e}, {delta})"
        name = self.fresh("f")
        self.emit(level, f"{name} = {text}")
        self.floats.append(name)

    def reduction(self, level: int) -> None:
        """A mean over (part of) a filled tile, in a barrier-free loop."""
        array = self.rng.choice(self.readable)
        name, k = self.fresh("f"), self.fresh("k")
        step = self.rng.choice((1, 1, 4))
        count = len(range(0, self.T, step))
        self.emit(level, f"{name} = 0.0")
        self.emit(level, f"for {k} in range(0, {self.T}, {step}):")
        self.emit(level + 1, f"{name} += {self.element(array, k)} * {self.rng.choice(('1.0', f'x[{self.own}]'))}"
                             f" * {1.0 / count!r}")
        self.floats.append(name)

    def simple(self, level: int, uniform: bool) -> None:
        d = self.max_depth
        kind = self.rng.choice(["new", "new", "set", "if", "loop", "atomic", "z", "reduce", "exchange", "exchange"])
        if kind == "exchange" and uniform:
            self.exchange(level)
        elif kind == "reduce" and self.readable and uniform:
            self.reduction(level)
        elif kind == "new" and uniform:
            name = self.fresh("f")
            self.emit(level, f"{name} = {self.fexpr(d)}")
            self.floats.append(name)
        elif kind == "if":
            self.emit(level, f"if {self.cond()}:")
            self.emit(level + 1, f"{self.rng.choice(self.floats)} = {self.fexpr(d)}")
            if self.chance(0.5):
                self.emit(level, "else:")
                self.emit(level + 1, f"{self.rng.choice(self.floats)} = {self.fexpr(d)}")
        elif kind == "loop":
            target, j = self.rng.choice(self.floats), self.fresh("j")
            self.emit(level, f"for {j} in range({self.rng.randint(1, 3)}):")
            self.loop_vars.append(j)
            self.emit(level + 1, f"{target} = 0.5 * {target} + 0.5 * ado.tanh({self.fexpr(d - 1)})")
            self.loop_vars.pop()
        elif kind == "atomic":
            self.emit(level, f"ado.atomic_add(acc, 0, 0.01 * ({self.fexpr(d - 1)}))")
        elif kind == "z":
            self.emit(level, f"z[{self.own}] = {self.fexpr(d - 1)}")
        else:
            target = self.rng.choice(self.floats)
            self.emit(level, f"{target} = {self.fexpr(d)}")

    def phase(self, level: int, fill_from: str | None = None) -> None:
        """Statements, the writes of some shared arrays, then a barrier. ``fill_from``: a tile
        fill (every thread stores a global element into its slot of one array) opens the phase."""
        written: list[_Shared] = []
        if fill_from is not None:
            array = self.rng.choice(self.arrays)
            written.append(array)
        else:
            for array in self.arrays:
                if self.chance(0.5 if array.filled else 0.7):
                    written.append(array)
        self.readable = [s for s in self.arrays if s.filled and s not in written]
        own_updates = [s for s in written if s.filled and self.chance(0.2)]
        statements = []
        for array in written:
            if fill_from is not None:
                slot = self.write_slot(array)
                statements.append((0, f"{slot} = {fill_from}"))
            elif array in own_updates:
                slot = self.element(array, "t") if not (self.rank == 2 and len(array.shape) == 2) \
                    else f"{array.name}[ti, tj]"
                statements.append((1, (slot, f"0.5 * {slot} + ({{}})")))
            else:
                statements.append((1, (self.write_slot(array), "{}")))
        order = self.rng.randint(0, 3)
        if fill_from is not None:
            self.emit(level, statements[0][1])
            statements = []
        for position in range(self.rng.randint(1, 4)):
            if position == order:
                self._emit_writes(level, statements)
                statements = []
            self.simple(level, uniform=True)
        self._emit_writes(level, statements)
        self.emit(level, "ado.sync_threads()")
        for array in written:
            array.filled = True
        self.readable = []

    def _emit_writes(self, level: int, statements) -> None:
        for _, (slot, template) in statements:
            value = template.format(self.fexpr(self.max_depth - 1))
            if self.chance(0.25) and slot.split("[")[0] not in self._partial_forbidden():
                self.emit(level, f"if {self.cond()}:")
                self.emit(level + 1, f"{slot} = {value}")
            else:
                self.emit(level, f"{slot} = {value}")

    def _partial_forbidden(self) -> set[str]:
        """Arrays not yet filled must be written by every thread (their slots would stay garbage)."""
        return {s.name for s in self.arrays if not s.filled}

    def tile_loop(self, level: int) -> None:
        """The matmul pattern: for r: fill a tile from global memory, sync, use it (, sync)."""
        r = self.fresh("r")
        T = self.T
        trips = self.rng.choice(["2", "3", "n // %d" % T if self.rank == 1 else "n1 // %d" % self.block[1]])
        self.emit(level, f"for {r} in range({trips}):")
        saved = list(self.floats)
        self.loop_vars.append(r)
        source = self.rng.choice(("x", "w", "x", "z"))
        if self.rank == 1:
            where = self.rng.choice([f"({r} * {T} + t) % n", f"(b * {T} + {r} * {T} + t) % n", "i"])
        else:
            where = self.rng.choice([f"i0, ({r} * {self.block[1]} + tj) % n1", "i0, i1",
                                     f"({r} + i0) % n0, (b1 * {self.block[1]} + tj) % n1"])
        if source == "z":
            where = self.own
        value = f"{source}[{where}]"
        if self.chance(0.4):
            value = self.rng.choice(("ado.sin({0})", "{0} * w[%s]" % self.own, "{0} * a")).format(value)
        before = {s.name: s.filled for s in self.arrays}
        self.phase(level + 1, fill_from=value)
        for _ in range(self.rng.randint(1, 2)):
            self.phase(level + 1)
        for s in self.arrays:
            s.filled = s.filled or before[s.name]
        self.loop_vars.pop()
        self.floats = saved


def _prologue(w: _Writer) -> None:
    B = w.block
    if w.rank == 1:
        w.emit(1, "i = ado.tid()")
        w.emit(1, "t = ado.thread_id()")
        w.emit(1, "b = ado.block_id()")
        w.emit(1, "n = len(x)")
    else:
        w.emit(1, "i0, i1 = ado.tid()")
        w.emit(1, "ti, tj = ado.thread_id()")
        w.emit(1, "b0, b1 = ado.block_id()")
        w.emit(1, "n0 = x.shape[0]")
        w.emit(1, "n1 = x.shape[1]")
        w.emit(1, f"t = ti * {B[1]} + tj")
    w.emit(1, "lane = ado.lane_id()")
    for array in w.arrays:
        shape = array.shape[0] if len(array.shape) == 1 else array.shape
        w.emit(1, f"{array.name} = ado.shared({shape}, ado.f64)")
    w.emit(1, f"f0 = x[{w.own}]")


def _shared_shapes(rng, block: tuple[int, ...]) -> tuple[int, ...]:
    T = block[0] * (block[1] if len(block) == 2 else 1)
    choices = [(T,), (T // 8, 8), (T // 16, 16)] if len(block) == 1 else [tuple(block), (T,)]
    return rng.choice(choices)


def _threads(block) -> int:
    return block if isinstance(block, int) else block[0] * block[1]


def generate(rng, *, max_depth: int = 2, max_phases: int = 4, warp: int = WARP) -> GeneratedBlockKernel:
    """A random block kernel (see the module docstring) for warps of ``warp`` lanes (32, or 64 for
    AMD's wavefronts: only blocks of whole wavefronts)."""
    block = rng.choice([b for b in BLOCKS if _threads(b) % warp == 0])
    block = (block,) if isinstance(block, int) else block
    w = _Writer(rng, block, max_depth, warp)
    w.arrays = [_Shared(f"S{k}", _shared_shapes(rng, block)) for k in range(rng.randint(1, MAX_ARRAYS))]
    shape = block[0] if len(block) == 1 else block
    w.emit(0, f"@ado.kernel(block={shape})")
    w.emit(0, f"def {KERNEL_NAME}({parameters(len(block))}):")
    _prologue(w)
    for _ in range(rng.randint(1, max_phases)):
        if w.chance(0.3):
            w.tile_loop(1)
        else:
            w.phase(1)
    w.readable = [s for s in w.arrays if s.filled]
    for _ in range(rng.randint(0, 2)):
        w.simple(1, uniform=True)
    total = " + ".join(w.floats[-6:])
    w.emit(1, f"out[{w.own}] = {w.fexpr(max_depth)} + 0.1 * ({total})")
    return GeneratedBlockKernel("\n".join(w.lines) + "\n", block)
