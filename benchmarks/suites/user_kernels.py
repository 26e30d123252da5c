"""Kernels a user writes (issue 31): LJ, Morse and three-body angle energies differentiated by our engine, against Warp, Numba, CuPy, plain JAX and hand-written CUDA.

The energies (benchmarks/kernels/user.py) are written the way a user writes them: per-atom energy
over a padded neighbor list of int32 indices (80 slots within 2.7 for the pair terms, 16 within
1.6 for the angle term), minimum image, f64, no hand-written forces, no recognised pattern, no
library kernel. Forces are the engine's derivative. Every side runs in this one process and goes
through the one timer; each side's forces are compared with plain JAX's (``force_rel_diff``).

GPU rows: ours ``jax.value_and_grad`` through ``ado.jax_kernel``; ours ``ado.vjp`` called on CuPy
arrays (zeroing ``d_pos`` and setting the seed each call, as a user must); hand-written CUDA
forces (benchmarks/cuda/user_kernels.cu: one thread or two lanes per atom for the pair terms,
atomics for the angle term; ``vs_cuda`` is over the fastest form); plain JAX ``value_and_grad``.
Host rows: ours ``ado.vjp`` on one thread and on all cores; ours through JAX; Warp's ``wp.Tape``
adjoint of the same kernel written in Warp (``vs_warp``; Warp's CPU launches ran on one core here);
Numba's hand-written forces on one thread and with ``prange``; plain JAX. Then the cost of a tiny
launch from Python (benchmarks/tiny_launches.py), and an llm.c-style GPT-2 (benchmarks/gpt2.py: its
C forward + loss reversed by ``ez.autodiff`` against its hand-written backward, host, needs clang).
A peer that is not installed is a row saying so. Each side's first call (compile + run) is a row
of its own (``first_call_ms``).
"""
from __future__ import annotations

import gc
import time

import numpy as np

from ..kernels.user import ENERGIES
from ..results import describe_error
from ..timing import time_calls

DEVICES = ("cpu", "cuda")
SIZE_KEY = "size"
SIZES = {"cuda": (100_000, 1_000_000), "cpu": (20_000,)}
QUICK_SIZES = {"cuda": (32_000,), "cpu": (500,)}
DENSITY, JITTER = 0.8, 0.05
PAIR_LIST = {"radius": 2.7, "slots": 80}          # LJ and Morse: cutoff 2.5 + skin 0.2
ANGLE_LIST = {"radius": 1.6, "slots": 16}         # the three-body term: cutoff 1.5 + skin 0.1
POTENTIALS = ("lj", "morse", "angle")
LLM_C = ("llm.c-style GPT-2 forward reversed by ez.autodiff vs its hand-written forward + backward (issue 31)")
LLM_C_NO_CLANG = "not measured: compiling benchmarks/kernels/gpt2.c needs clang from the ziglang wheel"


def add_arguments(parser) -> None:
    parser.add_argument("--sizes", type=int, nargs="*", help="atom counts (default: 10^5 and 10^6 on cuda, 2*10^4 on cpu)")
    parser.add_argument("--potentials", nargs="*", choices=POTENTIALS, help="energies to time (default: all)")
    parser.add_argument("--sides", nargs="*", help="time only sides whose name contains one of these words "
                                                   "(e.g. ours warp numba cuda jax cupy)")
    parser.add_argument("--no-launches", action="store_true", help="skip the tiny-launch rows")


class System:
    """A jittered fcc liquid with its neighbor lists (int32, -1 padded) and reference forces."""

    def __init__(self, n_atoms: int, jax_device):
        from adoffload.chemistry.dynamics import fcc_lattice
        cells = max(2, round((n_atoms / 4) ** (1 / 3)))
        pos, edge = fcc_lattice(cells, DENSITY)
        self.pos = np.ascontiguousarray(pos + JITTER * np.random.default_rng(0).normal(size=pos.shape))
        self.box, self.n, self.device = float(edge), len(self.pos), jax_device
        self.lists = {"pair": self.neighbors(**PAIR_LIST), "angle": self.neighbors(**ANGLE_LIST)}
        self._reference = {}

    def neighbors(self, radius: float, slots: int) -> np.ndarray:
        import jax
        import jax.numpy as jnp
        from adoffload.chemistry.neighbors import NeighborListSpec
        spec = NeighborListSpec(box=(self.box,) * 3, cutoff=radius, skin=0.0, capacity=slots, backend="jax")
        with jax.default_device(self.device):
            nl = jax.jit(spec.build)(jnp.asarray(self.pos))
        spec.check_overflow(nl)
        return np.ascontiguousarray(np.asarray(nl.neighbors), dtype=np.int32)

    def list_for(self, potential: str) -> np.ndarray:
        return self.lists["angle" if potential == "angle" else "pair"]

    def arguments(self, potential: str) -> list:
        """The kernel's inputs in parameter order: positions, neighbors, box, the potential's parameters."""
        return [self.pos, self.list_for(potential), self.box, *ENERGIES[potential][1].values()]

    def reference(self, potential: str) -> tuple[float, np.ndarray]:
        """(energy, forces) from plain JAX's gradient, the yardstick of every side."""
        if potential not in self._reference:
            import jax
            from ..peers.plain_jax import ENERGIES as PLAIN
            pos, nbr, *scalars = self.arguments(potential)
            with jax.default_device(self.device):       # arrays are arguments: never constants in the HLO
                e, g = jax.jit(jax.value_and_grad(lambda p, nb: PLAIN[potential](p, nb, *scalars)))(pos, nbr)
            self._reference[potential] = (float(e), -np.asarray(g))
        return self._reference[potential]

    def compare(self, potential: str, energy: float, forces) -> dict:
        e_ref, f_ref = self.reference(potential)
        forces = np.asarray(forces)
        return {"energy_rel_diff": abs(energy - e_ref) / max(abs(e_ref), 1e-300),
                "force_rel_diff": float(np.max(np.abs(forces - f_ref)) / max(np.max(np.abs(f_ref)), 1e-300))}


def measure_side(rows, base: dict, call, wait, check, reps: int, batch: int) -> None:
    """The first call (compile + run) as a row, then the timed row with the check's columns."""
    try:
        t0 = time.perf_counter()
        wait(call())
        first_ms = (time.perf_counter() - t0) * 1e3
        rows.append({**base, "measure": base["measure"] + ", first call", "first_call_ms": first_ms})
        timing = time_calls(call, wait, reps=reps, batch=batch, warmup=2)
        rows.append({**base, **timing.fields(), "batch": batch, **check()})
    except Exception as exc:  # noqa: BLE001 - a failing side is a row with its error
        rows.append({**base, "error": describe_error(exc)})


def wanted(side: str, filters) -> bool:
    return not filters or any(word.lower() in side.lower() for word in filters)


def jax_sides(potential: str, scalars: list):
    """(side name, jitted value_and_grad in the positions of the summed energy, a function of
    (positions, neighbors)): ours through ado.jax_kernel, and plain JAX."""
    import jax
    import jax.numpy as jnp
    import adoffload as ado
    from ..peers.plain_jax import ENERGIES as PLAIN
    ours = ado.jax_kernel(ENERGIES[potential][0])
    yield "ours: jax.value_and_grad (ado.jax_kernel)", jax.jit(jax.value_and_grad(
        lambda p, nb: jnp.sum(ours(p, nb, *scalars))))
    yield "plain JAX: jax.value_and_grad", jax.jit(jax.value_and_grad(lambda p, nb: PLAIN[potential](p, nb, *scalars)))


def time_jax_sides(rows, system, potential, base, reps, batch, filters) -> None:
    import jax
    pos, nbr, *scalars = system.arguments(potential)
    pos, nbr = jax.device_put(pos, system.device), jax.device_put(nbr, system.device)
    for side, fn in jax_sides(potential, scalars):
        if not wanted(side, filters):
            continue
        measure_side(rows, {**base, "side": side}, lambda fn=fn: fn(pos, nbr), jax.block_until_ready,
                     lambda fn=fn: _jax_check(system, potential, fn(pos, nbr)), reps, batch)


def _jax_check(system, potential, result) -> dict:
    energy, gradient = result
    return system.compare(potential, float(energy), -np.asarray(gradient))


def vjp_call(potential: str, arrays, box: float, device):
    """A call of ``ado.vjp`` of the user's energy kernel: ``arrays`` = (pos, neighbors, energy, d_pos,
    d_energy) of one array library (numpy or CuPy); d_pos is zeroed and the seed set to ones before
    each call, as a user's loop must."""
    import adoffload as ado
    kernel, params = ENERGIES[potential]
    reverse = ado.vjp(kernel, ["pos"])
    pos, nbr, energy, d_pos, d_energy = arrays

    def call():
        d_pos.fill(0.0)
        d_energy.fill(1.0)
        reverse(pos, nbr, box, *params.values(), energy, d_pos, d_energy, grid=len(pos), device=device)
    return call


def time_host_sides(rows, system, potential, base, reps, batch, filters) -> None:
    from adoffload.runtime.host import HostDevice
    pos, nbr, box, *_ = system.arguments(potential)
    n = system.n
    for label, device in (("one thread", HostDevice(workers=1)), ("all cores", "cpu")):
        side = f"ours: ado.vjp, {label}"
        if not wanted(side, filters):
            continue
        arrays = (pos, nbr, np.zeros(n), np.zeros_like(pos), np.ones(n))
        call = vjp_call(potential, arrays, box, device)
        measure_side(rows, {**base, "side": side, "threads": getattr(device, "workers", None) or "all"}, call,
                     lambda _: None, lambda: system.compare(potential, float(arrays[2].sum()), -arrays[3]), reps, batch)
    time_jax_sides(rows, system, potential, base, reps, batch, filters)
    peer_rows(rows, system, potential, base, reps, batch, filters)


def peer_rows(rows, system, potential, base, reps, batch, filters) -> None:
    pos, nbr, box, *_ = system.arguments(potential)
    params = ENERGIES[potential][1]
    if wanted("Warp: wp.Tape adjoint (CPU)", filters):
        side = {**base, "side": "Warp: wp.Tape adjoint (CPU)"}
        try:
            from ..peers import warp_peer
        except Exception as exc:  # noqa: BLE001 - not installed, or not usable here
            rows.append({**side, "skipped": f"Warp is not importable here ({describe_error(exc, 200)}); "
                                            "pip install warp-lang"})
        else:
            tape = warp_peer.TapeGradient(potential, pos, nbr, box, params)

            def check():
                energy, gradient = tape.result()
                return system.compare(potential, energy, -gradient)
            measure_side(rows, side, tape, lambda _: None, check, reps, batch)
    for threads in ("one thread", "all cores"):
        name = f"Numba: hand-written forces, {threads}"
        if not wanted(name, filters):
            continue
        side = {**base, "side": name}
        try:
            from ..peers import numba_peer
        except Exception as exc:  # noqa: BLE001
            rows.append({**side, "skipped": f"Numba is not importable here ({describe_error(exc, 200)})"})
            continue
        forces_fn = numba_peer.FORCES[potential].get(threads)
        if forces_fn is None:
            rows.append({**side, "skipped": "the three-body forces scatter to both neighbors; prange has no atomics"})
            continue
        energy, force, values = np.zeros(system.n), np.zeros_like(pos), numba_peer.params_array(params)
        measure_side(rows, side, lambda f=forces_fn: f(pos, nbr, box, values, energy, force), lambda _: None,
                     lambda: system.compare(potential, float(energy.sum()), force), reps, batch)


def time_gpu_sides(rows, system, potential, base, reps, batch, filters, cuda_module) -> None:
    time_jax_sides(rows, system, potential, base, reps, batch, filters)
    if wanted("ours: ado.vjp on CuPy arrays", filters):
        side = {**base, "side": "ours: ado.vjp on CuPy arrays"}
        try:
            import cupy
        except Exception as exc:  # noqa: BLE001
            rows.append({**side, "skipped": f"CuPy is not importable here ({describe_error(exc, 200)})"})
        else:
            pos, nbr, box, *_ = system.arguments(potential)
            arrays = (cupy.asarray(pos), cupy.asarray(nbr), cupy.zeros(system.n), cupy.zeros(pos.shape), cupy.ones(system.n))
            call = vjp_call(potential, arrays, box, "cuda")
            measure_side(rows, side, call, lambda _: cupy.cuda.Device().synchronize(),
                         lambda: system.compare(potential, float(arrays[2].sum()), -cupy.asnumpy(arrays[3])),
                         reps, batch)
            del arrays
    cuda_sides(rows, system, potential, base, reps, batch, filters, cuda_module)


def cuda_sides(rows, system, potential, base, reps, batch, filters, cuda_module) -> None:
    """The hand-written forces kernels, launched through our runtime on its stream."""
    forms = {"lj": ("lj_forces", "lj_forces_lanes2"), "morse": ("morse_forces", "morse_forces_lanes2"),
             "angle": ("angle_forces",)}[potential]
    for entry in forms:
        lanes = 2 if entry.endswith("lanes2") else 1
        name = f"hand-written CUDA forces ({lanes} {'lane' if lanes == 1 else 'lanes'}/atom)"
        if not wanted(name, filters):
            continue
        side = {**base, "side": name}
        if isinstance(cuda_module, str):
            rows.append({**side, "skipped": cuda_module})
            continue
        gpu, module = cuda_module
        pos, nbr, box, *scalars = system.arguments(potential)
        dev = gpu.upload({"pos": pos, "nbr": nbr, "energy": np.zeros(system.n), "force": np.zeros_like(pos)})
        try:
            fn = module.function(entry)
            args = [dev["pos"].ptr, dev["nbr"].ptr, box, *scalars, dev["energy"].ptr, dev["force"].ptr, system.n,
                    nbr.shape[1]]
            blocks = ((system.n * lanes + 127) // 128, 1, 1)

            def launch(fn=fn, args=args, blocks=blocks):
                if potential == "angle":          # atomics add into the forces: zero them first
                    gpu.device.memset(dev["force"], 0, gpu.stream)
                gpu.launch_raw(fn, blocks, (128, 1, 1), args)

            def check():
                energy = gpu.download(dev["energy"], np.zeros(system.n))
                return system.compare(potential, float(energy.sum()), gpu.download(dev["force"], pos))
            measure_side(rows, side, launch, lambda _: gpu.device.synchronize(), check, reps, batch)
        finally:
            gpu.free(dev)


def load_cuda(device: str):
    """(Gpu, loaded module) of cuda/user_kernels.cu, or the reason it cannot run here."""
    if device != "cuda":
        return "hand-written CUDA runs on a CUDA GPU"
    try:
        from ..gpu import Gpu, nvcc_cubin
        gpu = Gpu()
        return gpu, gpu.device.load_module(nvcc_cubin("user_kernels.cu"))
    except Exception as exc:  # noqa: BLE001 - no nvcc: the CUDA rows say so
        return f"cuda/user_kernels.cu could not be built or loaded: {describe_error(exc, 200)}"


def set_ratios(rows, column: str, prefix: str) -> None:
    """For each (measure, size): ``column`` = time / the fastest side whose name starts with ``prefix``."""
    groups = {}
    for r in rows:
        if "median_ms" in r and "first call" not in r.get("measure", ""):
            groups.setdefault((r["measure"], r["size"]), []).append(r)
    for group in groups.values():
        refs = [r for r in group if r["side"].startswith(prefix)]
        if not refs:
            continue
        best = min(refs, key=lambda r: r["median_ms"])
        for r in group:
            r[column] = r["median_ms"] / best["median_ms"]
            r[column + "_side"] = best["side"]


def run(rows, device: str, quick: bool, options) -> None:
    import jax
    jax.config.update("jax_enable_x64", True)
    jax_device = jax.devices("gpu" if device == "cuda" else "cpu")[0]
    reps = options.reps or (3 if quick else (20 if device == "cuda" else 10))
    batch = 1 if device == "cpu" else (2 if quick else 10)
    cuda_module = load_cuda(device)
    for n in options.sizes or (QUICK_SIZES if quick else SIZES)[device]:
        start = len(rows)
        try:
            system = System(n, jax_device)
        except Exception as exc:  # noqa: BLE001
            rows.append({"case": "system", "size": n, "error": describe_error(exc)})
            continue
        for potential in options.potentials or POTENTIALS:
            base = {"measure": f"{potential} energy + forces", "potential": potential, "size": system.n,
                    "size_unit": "atoms", "slots": system.list_for(potential).shape[1], "device": device}
            if device == "cuda":
                time_gpu_sides(rows, system, potential, base, reps, batch, options.sides, cuda_module)
            else:
                time_host_sides(rows, system, potential, base, reps, batch, options.sides)
            jax.clear_caches()
            gc.collect()
        group = rows[start:]
        set_ratios(group, "vs_cuda" if device == "cuda" else "vs_warp",
                   "hand-written CUDA" if device == "cuda" else "Warp")
        if device == "cpu":
            set_ratios(group, "vs_numba", "Numba")
        _resave(rows)
    if not options.no_launches:
        from ..tiny_launches import launch_rows
        start = len(rows)
        launch_rows(rows, device, quick, options.sides)
        group = rows[start:]
        for column, prefix in (("vs_numba", "Numba"), ("vs_warp", "Warp"), ("vs_cupy", "CuPy")):
            set_ratios(group, column, prefix)
        _resave(rows)
    llm_c_rows(rows, quick, options.reps)


def llm_c_rows(rows, quick: bool, reps: int | None) -> None:
    """benchmarks/gpt2.py's rows (host, whatever the device): ours and the hand backward, ``vs_hand``."""
    from .. import gpt2
    if not gpt2.clang_available():
        rows.append({"measure": LLM_C, "side": gpt2.OURS, "skipped": LLM_C_NO_CLANG})
        return
    try:
        measured = gpt2.measure(gpt2.SMALL if quick else gpt2.CONFIG, reps or (3 if quick else 10))
    except Exception as exc:  # noqa: BLE001
        rows.append({"measure": LLM_C, "side": gpt2.OURS, "error": describe_error(exc)})
        return
    for row in measured:
        rows.append({**row, "device": "cpu"})
    _resave(rows)


def _resave(rows) -> None:
    """Ratios are added to rows already saved: save them again."""
    store = getattr(rows, "store", None)
    if store is not None:
        store.save()


TIMED = ["measure", "side", "median_ms", "iqr_ms", "min_ms", "max_ms", "reps", "batch", "vs_cuda", "vs_warp",
         "vs_numba", "vs_cupy", "vs_hand", "force_rel_diff", "energy_rel_diff", "grad_rel_err"]


def tables(rows) -> list[str]:
    """Per size: the timed rows (ratios to the fastest side of each reference kind), the first calls,
    then what was skipped or failed, with the reason."""
    from ..report import table
    lines = []
    for size in sorted({r["size"] for r in rows if isinstance(r.get("size"), int)}):
        sized = [r for r in rows if r.get("size") == size]
        unit = next((r.get("size_unit") for r in sized if r.get("size_unit")), "")
        timed = [r for r in sized if "median_ms" in r]
        columns = [c for c in TIMED if any(c in r for r in timed)]
        refs = sorted({f"`{c}`: {r[c + '_side']}" for r in timed for c in ("vs_cuda", "vs_warp", "vs_numba", "vs_cupy")
                       if c + "_side" in r})
        lines += [f"### {size} {unit}", ""]
        if timed:
            lines += [table(timed, columns), ""] + (["Ratios over: " + "; ".join(refs) + ".", ""] if refs else [])
        first = [r for r in sized if "first_call_ms" in r]
        if first:
            lines += ["First calls (compile + run):", "", table(first, ["measure", "side", "first_call_ms"]), ""]
        other = [r for r in sized if "skipped" in r or "error" in r]
        if other:
            lines += [table(other, ["measure", "side", "skipped", "error"]), ""]
    rest = [r for r in rows if not isinstance(r.get("size"), int)]
    if rest:
        lines += [table(rest, ["case", "measure", "side", "skipped", "error"]), ""]
    return lines

# (side, ratio column, target, potentials it applies to or None for any) -- issue 31 and shared/BENCHMARKS.md
TARGETS = [("ours: jax.value_and_grad (ado.jax_kernel)", "vs_cuda", "<= 2.0", ("lj", "morse")),
           ("ours: ado.vjp on CuPy arrays", "vs_cuda", "(no target)", None),
           ("ours: ado.vjp, one thread", "vs_warp", "<= 1.0", None),
           ("ours: ado.vjp, all cores", "vs_warp", "<= 1.0", None),
           ("ours: saxpy launch (numpy arrays)", "vs_numba", "<= 3", None),
           ("ours: saxpy launch (numpy arrays)", "vs_warp", "<= 0.3", None),
           ("ours: saxpy vjp launch (numpy arrays)", "vs_numba", "(no target)", None),
           ("ours: saxpy launch on CuPy arrays", "vs_cupy", "<= 1.5", None),
           ("ours: saxpy vjp launch on CuPy arrays", "vs_cupy", "(no target)", None)]


def targets(rows) -> list[dict]:
    from ..targets import meets
    out = []
    for side, column, target, potentials in TARGETS:
        for r in rows:
            if r.get("side") != side or column not in r:
                continue
            if potentials and r.get("potential") not in potentials:
                target_here = "(no target)"
            else:
                target_here = target
            out.append({"measure": f"{r['measure']}, {r['size']} {r.get('size_unit', '')}: {side} / "
                                   f"{r[column + '_side']}", "measured": r[column], "target": target_here,
                        "met": meets(r[column], target_here)})
    from ..gpt2 import OURS
    for r in rows:
        if r.get("side") == OURS and "vs_hand" in r:
            out.append({"measure": f"{LLM_C}, {r['size']} parameters ({r['config']})", "measured": r["vs_hand"],
                        "target": "<= 2", "met": meets(r["vs_hand"], "<= 2")})
        elif r.get("measure") == LLM_C:
            out.append({"measure": LLM_C, "measured": "not measured", "target": "<= 2", "met": None})
    return out


def report(rows) -> list[str]:
    loads = "; ".join(sorted({f"{r['device']}" for r in rows if "device" in r}))
    return [f"Ratios (`vs_*`) are each row's time over the fastest side of that kind at the same size, in this run "
            f"(device: {loads or 'none'}). Host timings mean little on a loaded machine: see the environment's "
            "load average before and after. Rows whose side lost are kept as measured."]
