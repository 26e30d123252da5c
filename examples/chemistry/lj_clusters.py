"""Batch global optimization of Lennard-Jones clusters: basin hopping or a genetic algorithm over many clusters at once.

``--search basin`` (the default): every cluster is an independent basin-hopping walker; one step
perturbs all atoms, minimizes locally and accepts by Metropolis. ``--search ga``: the clusters are a
population; each generation makes as many children by Deaven-Ho cut-and-splice mating
(adoffload.chemistry.genetic), minimizes them and keeps the lowest distinct clusters of parents and
children. Either way, with the adoffload backend (the
default), each step's local minimizations of all clusters are one call of
``adoffload.optimize.minimize``: one kernel launch per device in which every thread runs one cluster's
whole L-BFGS (or FIRE) iteration, the forces from in-kernel AD of the energy helper
``adoffload.chemistry.kernels.lj_cluster_energy``. The plain-JAX reference (``--backend jax``) runs
FIRE in JAX, one XLA step per iteration. Clusters are split over every visible device of the
platform (``--devices N`` to use fewer; under ``jax.distributed``, over the devices of every host:
docs/scaling.md); the GA then runs one population per device (islands, also within a device:
``--island-size``).
``--starts lattices`` (the default from 56 atoms) starts every walker (or GA member) from one of 24
clusters found by lattice searching (adoffload.chemistry.lattice_search: which sites of an fcc, Mackay
icosahedral or Ino decahedral lattice the atoms occupy, on the host before the first step). LJ75's
Marks decahedron is found that way, and relaxes to the global minimum in the first local minimization;
from random starts neither search has reached it here (basin hopping on the host and an H200, the GA:
all stayed in the icosahedral funnel, best -396.282249).
Prints the lowest energy reached beside the published putative global minimum
(Cambridge Cluster Database: LJ13 -44.326801, LJ38 -173.928427, LJ55 -279.248470, LJ75 -397.492331, reduced units)
and when it was first reached.

    python examples/chemistry/lj_clusters.py                          # LJ13, CPU, seconds
    python examples/chemistry/lj_clusters.py --device cuda --atoms 38  # full size
    python examples/chemistry/lj_clusters.py --atoms 75 --until-reached        # LJ75 from lattice searches
"""
from __future__ import annotations

import argparse
import os
import sys
import time

STARTED = time.perf_counter()       # the whole run's clock: imports and JAX's start-up count too

from common import HelpFormatter, output_folder, pick_backend, progress, save_plot, setup_jax  # noqa: E402

PUBLISHED_MINIMA = {13: -44.326801, 38: -173.928427, 55: -279.248470, 75: -397.492331}
# Size presets: (clusters, basin-hopping steps, most iterations of one local minimization).
PRESETS = {("cpu", 13): (256, 25, 300), ("cpu", 38): (64, 200, 600), ("cpu", 75): (64, 2000, 1500),
           ("cuda", 13): (4096, 50, 400), ("cuda", 38): (16384, 400, 800), ("cuda", 75): (16384, 1000, 1500)}
# The GPU presets fill an H200: one walker per thread, and a local minimization is latency-bound, so
# 16384 LJ38 walkers took 0.40 s per FIRE minimization against 0.29 s for 4096 (2026-12-04-h200-walkers).
# The default local minimizer per device: the faster one measured there (FIRE 0.40 s against L-BFGS's
# 0.71 s on the H200 at 16384 walkers; on the 2-core host L-BFGS 0.08 s against FIRE's 0.18 s at 64).
DEFAULT_MINIMIZER = {"cpu": "lbfgs", "cuda": "fire"}
# FIRE's settings for reduced LJ units (adoffload.chemistry.optimize.FireOptions' defaults)
FIRE_OPTIONS = {"dt_start": 0.005, "dt_max": 0.05, "max_step": 0.1, "group": 3}
SEARCHES = {"basin": "basin hopping", "ga": "cut-and-splice GA"}
# --starts lattices: how many lattice searches (the three lattices in turn). --starts auto uses them from
# LATTICE_STARTS_FROM atoms: past the complete Mackay icosahedron (LJ55), most LJ global minima are
# lattice structures (Mackay overlayers, LJ75-77's and LJ102-104's Marks decahedra), and random starts
# miss the decahedral funnel; below, random starts reach LJ13 and LJ38 within seconds and the
# polyicosahedral minima (LJ19, LJ26) are on none of the lattices.
LATTICE_SEARCHES, LATTICE_STARTS_FROM = 24, 56
UNITS = {"basin": "basin-hopping step", "ga": "generation"}
# GA islands per device kind (None: one population per device). A GPU's minimization call costs nearly
# the same at 4096 clusters as at 16384 (latency-bound, above), so its generations are as many either
# way; 16384 members as islands of 256 run 64 small GAs at once instead of one slow-converging one.
ISLAND_SIZE = {"cuda": 256}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where JAX and the kernels run")
    p.add_argument("--backend", choices=["auto", "adoffload", "jax"], default="auto",
                   help="adoffload kernels, or the plain-JAX reference; auto: adoffload, unless it cannot "
                        "use the device (said on the console)")
    p.add_argument("--devices", type=int, help="how many devices of the platform share the walkers (default: all)")
    p.add_argument("--atoms", type=int, default=13, help="atoms per cluster (13, 38, 55 and 75 have their published minima here)")
    p.add_argument("--search", choices=["basin", "ga"], default="basin",
                   help="basin: basin hopping, every cluster an independent walker; ga: a genetic algorithm "
                        "(Deaven-Ho cut-and-splice mating of the clusters, adoffload.chemistry.genetic)")
    p.add_argument("--starts", choices=["auto", "random", "lattices"], default="auto",
                   help="where walkers (or the GA's first members) start: random, atoms uniform in a sphere; "
                        f"lattices, one of {LATTICE_SEARCHES} clusters found by lattice searching on fcc, Mackay "
                        "icosahedral and Ino decahedral lattices (adoffload.chemistry.lattice_search, on the host "
                        "before the first step), jittered; auto: lattices from "
                        f"{LATTICE_STARTS_FROM} atoms, random below")
    p.add_argument("--clusters", type=int, help="walkers run at once, or the GA's population "
                                                "(default: by device and size)")
    p.add_argument("--steps", type=int, help="basin-hopping steps, or GA generations (default: by device and size)")
    p.add_argument("--fire-steps", type=int, help="most iterations of one local minimization, FIRE or L-BFGS (the "
                                                 "jax backend's FIRE always runs them all; default: by device and size)")
    p.add_argument("--minimizer", choices=["lbfgs", "fire"],
                   help="local minimizer of the adoffload backend (adoffload.optimize.minimize); default: "
                        "L-BFGS on the CPU, FIRE on a GPU (the faster of the two, measured on each)")
    p.add_argument("--layout", choices=["auto", "thread", "warp"], default="auto",
                   help="adoffload backend: minimize's layout, one cluster per thread or per warp "
                        "(docs/optimize.md, 'How it runs')")
    p.add_argument("--gtol", type=float, default=1e-5, help="a local minimization ends when no force component "
                                                            "exceeds this (adoffload backend)")
    p.add_argument("--step-size", type=float, default=0.4, help="largest random displacement per coordinate")
    p.add_argument("--surface-moves", type=float, default=0.0, metavar="P",
                   help="adoffload backend: the fraction of moves that, instead of kicking every atom, put the "
                        "--surface-atoms least bound atoms at random places on the cluster's surface (angular moves)")
    p.add_argument("--surface-atoms", type=int, default=2, help="atoms a surface move relocates")
    p.add_argument("--restart-every", type=int, metavar="K",
                   help="every K-th step restarts every walker from a new random cluster (each keeps its best); "
                        "default: never")
    p.add_argument("--kT", type=float, default=0.8, help="basin hopping's Metropolis temperature (reduced units)")
    p.add_argument("--mutation", type=float, default=0.1, metavar="P",
                   help="ga: the fraction of children changed by a basin-hopping move (--step-size, "
                        "--surface-moves) before their local minimization")
    p.add_argument("--tournament", type=int, default=3,
                   help="ga: each parent is the lowest of this many members drawn at random")
    p.add_argument("--island-size", type=int,
                   help="ga: the population splits into islands of this many members, each its own GA (mating "
                        "and selection within it; every device's share is islands too); default: one population "
                        "on the CPU, islands of 256 on a GPU where that divides each device's share")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--until-reached", action="store_true",
                   help="stop the search at the first step where the published minimum is reached")
    p.add_argument("--time-limit", type=float, help="stop the search after the step that passes this many seconds "
                                                    "(compiling included; default: no limit)")
    p.add_argument("--no-compile-ahead", action="store_true",
                   help="adoffload backend: build the local minimizer's kernel when JAX first calls it, not on a "
                        "background thread from the start of the script (adoffload.optimize.compile_ahead), and "
                        "compile each basin-hopping step's XLA program then too, not while the first "
                        "minimizations run")
    p.add_argument("--out", default="results/lj_clusters", help="folder for the plot (created if missing)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    args.minimizer = args.minimizer or DEFAULT_MINIMIZER[args.device]
    from adoffload.chemistry.sharding import start_distributed
    start_distributed()                  # a no-op unless JAX_COORDINATOR_ADDRESS is set (docs/scaling.md)
    # The search's clock starts here, before the kernel's build begins, so that every compile counts
    # (the build overlaps JAX's device start-up and the backend checks, which count too).
    began = time.perf_counter()
    ahead = _compile_ahead(args)         # on a background thread while JAX brings up its devices
    device = setup_jax(args.device)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from adoffload.chemistry.optimize import FireOptions
    from adoffload.chemistry.sharding import describe, over_walkers, padded_size, select_devices, split_keys, to_host, walker_mesh

    backend_name = pick_backend(args.backend, args.device, own_kernels=True)
    if args.surface_moves and backend_name != "adoffload":
        sys.exit("--surface-moves: the adoffload backend's option (the jax backend kicks every atom)")
    if args.search == "ga" and args.restart_every:
        sys.exit("--restart-every: a basin-hopping option (the genetic algorithm keeps its population)")
    clusters, steps, local_steps = _sizes(args)
    devices = select_devices(args.device, args.devices)
    mesh = walker_mesh(devices)
    if padded_size(clusters, mesh) != clusters:
        print(f"note: {clusters} clusters rounded up to {padded_size(clusters, mesh)}, a multiple of {len(devices)} devices")
        clusters = padded_size(clusters, mesh)
    if args.search == "ga":
        args.island_size = _island_size(args, clusters // len(devices))
    n = args.atoms
    container = 0.6 + (3.0 * n / (4.0 * np.pi)) ** (1.0 / 3.0)
    if backend_name == "adoffload":
        local_minimize, move, hop, minimizer = _adoffload_steps(args, n, local_steps, container)
    else:
        local_minimize, move, hop, minimizer = _jax_steps(args, n, FireOptions(steps=local_steps), container)
    if args.starts == "auto":
        args.starts = "lattices" if n >= LATTICE_STARTS_FROM else "random"
    start = _start(local_minimize, n, args.starts, args.seed)
    if args.search == "ga":
        hop = _ga_generation(args, local_minimize, move)

    print(f"LJ{n}: {clusters} clusters x {steps} {UNITS[args.search]}s, {SEARCHES[args.search]}, {minimizer}, "
          f"backend {backend_name}, on {describe(devices)}")
    start, hop = over_walkers(start, mesh), over_walkers(hop, mesh)
    published = PUBLISHED_MINIMA.get(n)
    reached, stopped = None, None
    key = jax.random.PRNGKey(args.seed)
    with jax.default_device(device):
        key, sub = jax.random.split(key)
        walkers = start(split_keys(sub, clusters, mesh))
        if ahead is not None:           # the hop's XLA program compiles while the first minimizations run
            hop = _compiled_ahead(hop, walkers, split_keys(sub, clusters, mesh))
        best_history = [float(jnp.min(walkers.best_energy))]
        bar = progress(SEARCHES[args.search])
        for s in range(steps):
            if reached is None and published is not None and best_history[-1] < published + REACHED:
                reached = (s, time.perf_counter() - began)
            if (reached is not None and args.until_reached) or (
                    args.time_limit is not None and time.perf_counter() - began > args.time_limit):
                stopped = f"stopped after {s} of {steps} steps ({'reached' if reached else '--time-limit'})"
                break
            key, sub = jax.random.split(key)
            if args.restart_every and (s + 1) % args.restart_every == 0:
                walkers = restarted(walkers, start(split_keys(sub, clusters, mesh)))
            else:
                walkers = hop(walkers, split_keys(sub, clusters, mesh))
            if isinstance(hop, _compiled_ahead):
                hop = hop.compiled          # the executable itself from the second step on
            best_history.append(float(jnp.min(walkers.best_energy)))
            bar(s + 1, steps)
    seconds = time.perf_counter() - began
    done_steps = len(best_history) - 1
    if reached is None and published is not None and best_history[-1] < published + REACHED:
        reached = (done_steps, seconds)

    best = best_history[-1]
    found = to_host(walkers.best_energy)
    print(f"\nlowest energy reached  {best:.6f}")
    if published is not None:
        hits = int(np.sum(found < published + REACHED))
        print(f"published global min.  {published:.6f}   (Cambridge Cluster Database)")
        print(f"difference             {best - published:+.2e}; walkers at the global minimum: {hits}/{clusters}")
        if reached is not None:
            print(f"reached the published minimum: yes, first after {reached[0]} {UNITS[args.search]}(s), "
                  f"{reached[1]:.1f} s (compiling included; {reached[1] + began - STARTED:.1f} s since the script "
                  f"started)")
        else:
            print(f"reached the published minimum: NO (best {best - published:+.2e} above it after {done_steps} "
                  f"steps)")
    if stopped:
        print(stopped)
    print(f"time {seconds:.1f} s for the search ({clusters * (done_steps + 1) / seconds:.3g} local minimizations/s, "
          f"compiling included); {time.perf_counter() - STARTED:.1f} s since the script started (imports and "
          f"JAX's start-up too)")

    out = output_folder(args.out)
    plot = save_plot(os.path.join(out, f"lj{n}_best_energy.png"),
                     lambda fig: _draw(fig, best_history, published, n, found, args.search), size=(6, 6))
    if plot:
        print(f"plot: {plot}")
    print(f"output folder: {out}")
    return {"best": best, "published": published, "history": best_history, "seconds": seconds,
            "walkers_at_minimum": int(np.sum(found < (published or -np.inf) + 1e-4)),
            "reached": reached, "steps": done_steps, "clusters": clusters, "starts": args.starts,
            "started_to_search": began - STARTED}     # what the search's clock leaves out: imports


def _minimizer_options(args) -> dict:
    return dict(FIRE_OPTIONS, gtol=args.gtol) if args.minimizer == "fire" else {"gtol": args.gtol, "maxcor": 6}


def _sizes(args) -> tuple[int, int, int]:
    clusters, steps, local_steps = PRESETS.get((args.device, args.atoms), PRESETS[(args.device, 38)])
    return args.clusters or clusters, args.steps or steps, args.fire_steps or local_steps


def _compile_ahead(args):
    """Start building the local minimizer's kernel (adoffload.optimize.compile_ahead) for one
    device's share of the walkers, or None where the adoffload backend is not asked for. Only the
    time it takes moves (it overlaps JAX's start-up); a guess of the share that is wrong (devices
    found later) is only a build the first call does not use."""
    if args.no_compile_ahead or args.backend == "jax":
        return None
    import numpy as np
    import jax
    from adoffload.chemistry.kernels import lj_cluster_energy
    from adoffload.optimize import compile_ahead
    # before the build starts: the x64 mode decides the kernel's integer type, and setup_jax sets it
    # only after (a build for int32 here was a second, serial build of the kernel in the first call)
    jax.config.update("jax_enable_x64", True)
    clusters, _, local_steps = _sizes(args)
    share = clusters // (args.devices or 1)
    return compile_ahead(lj_cluster_energy, jax.ShapeDtypeStruct((share, 3 * args.atoms), np.float64),
                         args=(1.0, 1.0), method=args.minimizer, maxiter=local_steps,
                         options=_minimizer_options(args), platform={"cuda": "cuda"}.get(args.device, "cpu"),
                         layout=args.layout)


class _compiled_ahead:
    """``fn`` (a jitted function) with its XLA program for these arguments compiled on a thread
    (``jax.jit(...).lower(...).compile()``); calls wait for it. ``.compiled`` is the function to keep
    calling (the AOT executable: the same program, compiled once)."""

    def __init__(self, fn, *example):
        import threading
        self._fn, self._done, self._error = fn, threading.Event(), None
        self.compiled = self
        shapes = [_shape_of(a) for a in example]
        # not a daemon: a run that ends before its first hop waits for the compile at exit (XLA in a
        # thread killed at interpreter shutdown aborts the process)
        threading.Thread(target=self._compile, args=(shapes,), name="hop-compile").start()

    def _compile(self, shapes):
        try:
            self.compiled = self._fn.lower(*shapes).compile()
        except Exception as error:          # raised again by the first call, where it happens anyway
            self._error = error
        finally:
            self._done.set()

    def __call__(self, *args):
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self.compiled(*args)


def _shape_of(tree):
    """``tree`` with every array a ``jax.ShapeDtypeStruct`` of its shape, dtype and sharding."""
    import jax
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), tree)


def _adoffload_steps(args, n: int, local_steps: int, container: float):
    """local_minimize(x), move(x, key) (one cluster's kick or surface move) and the basin-hopping
    hop(walkers, keys) for one device's share of walkers, the local minimizations of all of them one
    call of adoffload.optimize.minimize (one launch)."""
    import jax
    import jax.numpy as jnp
    from adoffload.chemistry.kernels import lj_cluster_energy
    from adoffload.chemistry.optimize import Walker, accept, perturb
    from adoffload.optimize import minimize
    from adoffload.optimize.status import NONFINITE
    options = _minimizer_options(args)

    def local_minimize(x):
        result = minimize(lj_cluster_energy, x.reshape(x.shape[0], 3 * n), args=(1.0, 1.0), method=args.minimizer,
                          maxiter=local_steps, options=options, layout=args.layout)
        energy = jnp.where(result.status == NONFINITE, jnp.inf, result.fun)
        return result.x.reshape(x.shape), energy

    def move(x, key):
        kick_key, surface_key, pick_key = jax.random.split(key, 3)
        kicked = perturb(Walker(x, None, x, None), kick_key, step_size=args.step_size, container=container)
        if args.surface_moves <= 0:
            return kicked
        moved = surface_move(x, surface_key, args.surface_atoms)
        return jnp.where(jax.random.uniform(pick_key) < args.surface_moves, moved, kicked)

    def hop(walkers, keys):
        keys = jax.vmap(jax.random.split)(keys)
        x = jax.vmap(move)(walkers.x, keys[:, 0])
        x, energy = local_minimize(x)
        return jax.vmap(lambda w, xi, e, k: accept(w, xi, e, k, kT=args.kT))(walkers, x, energy, keys[:, 1])

    what = f"{'L-BFGS' if args.minimizer == 'lbfgs' else 'FIRE'} to gtol {args.gtol:g} (at most {local_steps} iterations)"
    return local_minimize, move, hop, what


def _start(local_minimize, n: int, starts: str = "random", seed: int = 0):
    """start(keys): every walker (or member) a minimized random cluster, or with ``starts="lattices"``
    one of LATTICE_SEARCHES lattice-searched clusters (adoffload.chemistry.lattice_search; searched
    here, on the host), each walker's pick and a jitter of +-0.05 per coordinate from its key."""
    import jax
    import jax.numpy as jnp
    from adoffload.chemistry.optimize import Walker, random_cluster

    if starts == "lattices":
        from adoffload.chemistry.lattice_search import lattice_search_clusters
        began = time.perf_counter()
        searched, lattice_energy = lattice_search_clusters(n, LATTICE_SEARCHES, seed=seed)
        print(f"lattice search: {LATTICE_SEARCHES} clusters in {time.perf_counter() - began:.1f} s, lowest lattice "
              f"energy {lattice_energy.min():.4f} (before relaxing the lattice strain)")
        searched = jnp.asarray(searched)

    def lattice_start(key):
        pick_key, jitter_key = jax.random.split(key)
        x = searched[jax.random.randint(pick_key, (), 0, searched.shape[0])]
        return x + jax.random.uniform(jitter_key, x.shape, dtype=x.dtype, minval=-0.05, maxval=0.05)

    def start(keys):
        if starts == "lattices":
            x = jax.vmap(lattice_start)(keys)
        else:
            x = jax.vmap(lambda k: random_cluster(k, n))(keys)
        x, energy = local_minimize(x)
        return Walker(x, energy, x, energy)
    return start


def _island_size(args, share: int) -> int | None:
    """The GA's island size for one device's ``share`` of the clusters: --island-size, else the device's
    default where it divides the share (else one population); exits where --island-size does not."""
    if args.island_size is None:
        size = ISLAND_SIZE.get(args.device)
        return size if size and share % size == 0 else None
    if share % args.island_size:
        sys.exit(f"--island-size {args.island_size} does not divide each device's {share} clusters")
    return args.island_size


def _ga_generation(args, local_minimize, move):
    """generation(population, keys) of adoffload.chemistry.genetic for one device's share: with several
    devices each runs its own population (an island model: no communication between devices, as the
    basin-hopping walkers). Mutations are the basin-hopping moves (--step-size kicks, --surface-moves)."""
    import functools
    from adoffload.chemistry.genetic import generation
    return functools.partial(generation, local_minimize=local_minimize, mutate=move, mutation=args.mutation,
                             tournament_size=args.tournament, island_size=args.island_size)


def restarted(walkers, fresh):
    """Each walker continues from its fresh (minimized random) cluster and keeps the best it had."""
    import jax.numpy as jnp
    from adoffload.chemistry.optimize import Walker
    kept = walkers.best_energy < fresh.best_energy
    return Walker(fresh.x, fresh.energy, jnp.where(kept[:, None, None], walkers.best_x, fresh.best_x),
                  jnp.where(kept, walkers.best_energy, fresh.best_energy))


def surface_move(x, key, count: int):
    """An angular move (Wales & Doye 1997): the ``count`` atoms of highest pair energy (least bound) go to
    random directions from the centroid, at the distance of the outermost atom."""
    import jax
    import jax.numpy as jnp
    n = x.shape[0]
    d = x[:, None, :] - x[None, :, :]
    r2 = jnp.sum(d * d, -1) + jnp.eye(n, dtype=x.dtype)
    s6 = 1.0 / r2 ** 3
    atom_energy = jnp.sum(jnp.where(jnp.eye(n, dtype=bool), 0.0, 4.0 * (s6 * s6 - s6)), 1)
    _, worst = jax.lax.top_k(atom_energy, count)
    center = jnp.mean(x, axis=0)
    radius = jnp.max(jnp.linalg.norm(x - center, axis=-1))
    u = jax.random.normal(key, (count, 3), dtype=x.dtype)
    return x.at[worst].set(center + radius * u / jnp.linalg.norm(u, axis=-1, keepdims=True))


def _jax_steps(args, n: int, fire, container: float):
    """The plain-JAX reference: FIRE in JAX (fixed iterations), energy from the jax backend; the same
    pieces as _adoffload_steps (the move always kicks every atom)."""
    import jax
    import jax.numpy as jnp
    from adoffload.chemistry import get_backend
    from adoffload.chemistry.optimize import Walker, basin_hopping_step, fire_minimize, perturb
    backend = get_backend("jax")

    def energy(x):
        return jnp.sum(backend.cluster_lj_energy(x, 1.0, 1.0))

    def local_minimize(x):
        x, e, _ = jax.vmap(lambda xi: fire_minimize(energy, xi, fire))(x)
        return x, jnp.where(jnp.isfinite(e), e, jnp.inf)

    def move(x, key):
        return perturb(Walker(x, None, x, None), key, step_size=args.step_size, container=container)

    def hop(walkers, keys):
        return jax.vmap(lambda w, k: basin_hopping_step(energy, w, k, step_size=args.step_size, kT=args.kT,
                                                        container=container, fire=fire))(walkers, keys)
    return local_minimize, move, hop, f"FIRE in JAX ({fire.steps} iterations)"


def _draw(fig, history, published, n, found, search):
    """Top: the best energy per step; with a published minimum, its distance above it on a log
    scale (drawn beside the reference line, the trace hid under it). Bottom: where every
    walker's best energy ended."""
    import numpy as np
    trace_axis, walkers_axis = fig.subplots(2, 1)
    steps = np.arange(len(history))
    found = np.asarray(found)
    found = found[np.isfinite(found)]
    if published is None:
        trace_axis.plot(steps, history, marker=".", label="best energy over all walkers")
        trace_axis.set_ylabel("energy (reduced units)")
        walkers_axis.hist(found, bins=30)
        walkers_axis.set_xlabel("each walker's best energy")
    else:
        gap = np.maximum(np.asarray(history) - published, MIN_GAP)
        trace_axis.semilogy(steps, gap, marker=".", label=f"best over all walkers - published ({published})")
        trace_axis.axhline(REACHED, color="k", linestyle="--", linewidth=0.8, label=f"{REACHED:g}: minimum reached")
        trace_axis.set_ylabel("energy above the\npublished minimum")
        walker_gaps = np.maximum(found - published, MIN_GAP)
        walkers_axis.hist(walker_gaps, bins=np.logspace(np.log10(MIN_GAP), np.log10(walker_gaps.max() * 1.01 + MIN_GAP), 30))
        walkers_axis.set_xscale("log")
        walkers_axis.axvline(REACHED, color="k", linestyle="--", linewidth=0.8)
        walkers_axis.set_xlabel(f"each walker's best energy above the minimum (floor {MIN_GAP:g})")
    walkers_axis.set_ylabel("walkers")
    trace_axis.set_xlabel(UNITS[search])
    trace_axis.set_title(f"LJ{n} {SEARCHES[search]}, {len(found)} {'members' if search == 'ga' else 'walkers'}")
    trace_axis.legend()


MIN_GAP, REACHED = 1e-7, 1e-4      # plot floor (below the energies' precision); "at the minimum"


if __name__ == "__main__":
    main()
