"""Choose who computes: the adoffload kernels (``"adoffload"``) or the plain-JAX reference (``"jax"``).

Both backends expose the same functions with the same arguments (see ``reference.py``),
all usable inside ``jax.jit``, ``jax.grad`` and ``jax.vmap``. With ``"adoffload"`` each call
goes through ``ado.jax_kernel``, so ``jax.grad`` of an energy runs the kernel's adjoint
(the forces are ``-dE/dx`` from IR-level AD). Everything above this module (neighbor lists,
force fields, integrators, examples) takes a backend name and nothing else changes.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

from . import reference
from ..errors import BackendCheckError, BackendUnavailableError

BACKENDS = ("adoffload", "jax")

# Backend function -> (its kernel's Out names, how many leading arguments the kernel takes;
# None = all). The trailing arguments the reference needs are static sizes that the kernel
# reads from its Out shapes instead.
_KERNEL_TABLE = {
    "lj_energy":           (("e",), None),
    "morse_energy":        (("e",), None),
    "coulomb_energy":      (("e",), None),
    "lj_energy_forces":      (("e", "forces"), None),
    "morse_energy_forces":   (("e", "forces"), None),
    "coulomb_energy_forces": (("e", "forces"), None),
    "cluster_lj_energy":   (("e",), None),
    "bond_energy":         (("e",), None),
    "angle_energy":        (("e",), None),
    "cell_index":          (("cell",), None),
    "cell_ranges":         (("start", "count"), 1),              # (sorted_cells | n_cells)
    "cell_neighbors":      (("neighbors", "n_neighbors"), 8),    # (... cutoff | capacity, max_per_cell)
    "all_pairs_neighbors": (("neighbors", "n_neighbors"), 3),    # (pos, box, cutoff | capacity)
}


def get_backend(name: str = "adoffload", *, adjoint: bool = True, second_order: bool = False,
                device: str | None = None) -> SimpleNamespace:
    """The functions of backend ``name`` (``"adoffload"`` or ``"jax"``) as attributes.

    ``adjoint=True`` also checks the adoffload kernels' adjoints through ``jax.grad`` (forces);
    ``adjoint=False`` only the primal kernels (neighbor lists). ``second_order=True`` also
    checks gradients of forces with respect to positions (reverse over reverse; a gradient in
    the parameters alone is one vector-forward launch, ``jax/scalar_jvp.py``). ``device``
    ("cpu", "cuda"; default: JAX's default device) must be one adoffload can run on. Only a missing device or GPU toolchain
    is ``BackendUnavailableError``; a kernel that fails to compile, or a check that gives a
    wrong value, raises its own error (never a quiet fallback). The checks run eagerly even
    when the first use is inside ``jax.jit``.
    """
    if name == "jax":
        return SimpleNamespace(name="jax", **{f: getattr(reference, f) for f in _KERNEL_TABLE})
    if name != "adoffload":
        raise BackendUnavailableError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    _check_device(device)
    import jax
    with jax.ensure_compile_time_eval():
        backend = _kernel_backend(_platform(device))
        if adjoint:
            _adjoint_smoke_test()
        if second_order:
            _second_order_smoke_test()
    return backend


def available(name: str, *, adjoint: bool = True, second_order: bool = False,
              device: str | None = None) -> tuple[bool, str]:
    """Whether backend ``name`` can run on ``device`` here, and why not. Only a missing device or
    toolchain answers False; any other failure is raised (see ``get_backend``)."""
    try:
        get_backend(name, adjoint=adjoint, second_order=second_order, device=device)
    except BackendUnavailableError as error:
        return False, str(error)
    return True, ""


def default_backend(device: str | None = None) -> str:
    """``"adoffload"`` when it can run on ``device``, else ``"jax"``."""
    return "adoffload" if available("adoffload", device=device)[0] else "jax"


def _platform(device: str | None) -> str:
    """"cpu" or "gpu": where the kernels of a backend for ``device`` will run (it picks the
    fused kernels' lanes per atom)."""
    import jax
    return "cpu" if (device or jax.default_backend()) == "cpu" else "gpu"


def _check_device(device: str | None) -> None:
    """Raise BackendUnavailableError when adoffload cannot launch on ``device`` here."""
    import jax
    from ..errors import DeviceError, ToolNotFoundError
    platform = device or jax.default_backend()
    if platform == "cpu":
        return
    kind = {"gpu": "cuda", "cuda": "cuda", "rocm": "hip", "hip": "hip"}.get(platform)
    if kind is None:
        raise BackendUnavailableError(f"adoffload kernels do not run on JAX platform {platform!r}")
    try:
        from ..runtime import get_device
        get_device(kind)
    except (DeviceError, ToolNotFoundError, ImportError) as error:
        raise BackendUnavailableError(f"no {kind} device adoffload can use here "
                                      f"({type(error).__name__}: {error})") from error


@functools.cache
def _kernel_backend(platform: str = "cpu") -> SimpleNamespace:
    import adoffload as ado
    from . import kernels           # a kernel that fails to compile raises its own located error
    functions = {name: _wrap(ado, name, getattr(kernels, name), outs, taken, platform)
                 for name, (outs, taken) in _KERNEL_TABLE.items()}
    backend = SimpleNamespace(name="adoffload", **functions)
    _smoke_test(backend)
    return backend


_TWO_ATOMS = ([[0.0, 0.0, 0.0], [1.1, 0.2, -0.1]], [[1], [0]])


def _smoke_test(backend) -> None:
    """Compile and run one primal kernel on two atoms against the reference."""
    import jax.numpy as jnp
    pos = jnp.asarray(_TWO_ATOMS[0], dtype=jnp.float64)
    _compare("LJ cluster energy kernel", lambda x: jnp.sum(backend.cluster_lj_energy(x, 1.0, 1.0)),
             lambda x: jnp.sum(reference.cluster_lj_energy(x, 1.0, 1.0)), pos)


@functools.cache
def _adjoint_smoke_test() -> None:
    """Forces of the neighbor-list LJ kernel through jax.grad (its adjoint) on two atoms."""
    backend = _kernel_backend(_platform(None))
    import jax
    import jax.numpy as jnp
    pos = jnp.asarray(_TWO_ATOMS[0], dtype=jnp.float64)
    neighbors, box = jnp.asarray(_TWO_ATOMS[1], dtype=jnp.int64), jnp.full(3, 10.0)
    force = lambda fns: lambda x, nb, bx: jax.grad(lambda y: jnp.sum(fns.lj_energy(y, bx, nb, 1.0, 1.0, 2.5)))(x)
    _compare("adjoint of the LJ energy kernel (forces)", force(backend), force(reference), pos, neighbors, box)


@functools.cache
def _second_order_smoke_test() -> None:
    """The gradient of a force-matching loss with respect to positions, sigma and epsilon
    (reverse over reverse: the adjoint of the LJ adjoint kernel, which has a dynamic tape).

    Neighbor lists are padded with -1; the kernel must stay inside its arrays for those
    slots too, which is checked first on guarded buffers through the numpy launcher (a stray
    write there would corrupt memory under JAX)."""
    backend = _kernel_backend(_platform(None))
    _second_order_stays_in_bounds()
    import jax
    import jax.numpy as jnp
    pos = jnp.asarray(_TWO_ATOMS[0], dtype=jnp.float64)
    neighbors, box = jnp.asarray(_PADDED_NEIGHBORS, dtype=jnp.int64), jnp.full(3, 10.0)

    def fit_gradient(fns):
        def gradient(x, nb, bx):
            def loss(x, sigma, epsilon):
                forces = jax.grad(lambda y: jnp.sum(fns.lj_energy(y, bx, nb, sigma, epsilon, 2.5)))(x)
                return jnp.sum(forces ** 2)
            return jnp.concatenate([jnp.ravel(g) for g in jax.grad(loss, argnums=(0, 1, 2))(x, 1.0, 1.0)])
        return gradient
    _compare("gradient of forces (reverse over reverse of the LJ energy kernel)",
             fit_gradient(backend), fit_gradient(reference), pos, neighbors, box)


_PADDED_NEIGHBORS = [[1, -1], [0, -1]]
_GUARD = 16


def _second_order_stays_in_bounds() -> None:
    """Run the adjoint of the LJ adjoint kernel once through the numpy launcher on arrays
    with guard cells (-0.0: even adding 0.0 flips its sign bit) around each of them."""
    import re
    import numpy as np
    import adoffload as ado
    from . import kernels
    wrt = ["pos", "sigma", "epsilon"]
    kernel = ado.vjp(ado.vjp(kernels.lj_energy, wrt), wrt)
    values = {"pos": np.asarray(_TWO_ATOMS[0]), "box": np.full(3, 10.0), "neighbors": np.asarray(_PADDED_NEIGHBORS),
              "sigma": 1.0, "epsilon": 1.0, "cutoff": 2.5, "e": np.zeros(2)}
    args, guarded = [], []
    for p in kernel.signature.visible_params:
        base = re.sub(r"^(d\d*_)+", "", p.name)
        if not p.is_array:
            args.append(values[p.name])
            continue
        shape = np.shape(values[base]) if np.ndim(values[base]) else (1,)
        data = np.asarray(values[p.name]) if p.name in values else np.full(shape, 0.5)
        buffer = np.full(data.size + 2 * _GUARD, -0.0 if data.dtype.kind == "f" else 0, data.dtype)
        buffer[_GUARD:_GUARD + data.size] = data.ravel()
        args.append(buffer[_GUARD:_GUARD + data.size].reshape(shape))
        guarded.append((p.name, buffer))
    kernel(*args, grid=2)
    for name, buffer in guarded:
        cells = np.concatenate([buffer[:_GUARD], buffer[-_GUARD:]])
        if buffer.dtype.kind == "f" and not np.all(np.signbit(cells)):
            raise BackendCheckError(
                f"the adjoint of the LJ adjoint kernel ('{kernel.name}') writes outside array '{name}' for padded "
                "(-1) neighbor slots (an AD bug: the reverse of a guarded branch accumulates at index -1); "
                "use backend='jax' for fitting to forces until it is fixed")


def _compare(what, ours, expected, *args) -> None:
    """Raise BackendCheckError when ``ours(*args)`` (adoffload) differs from ``expected(*args)`` (the
    reference). Each side is one jitted program of the arrays ``args``: run op by op (or jitted over
    closed-over arrays, which are not traced), the checks were ~80 XLA compiles of one operation each
    (benchmarks/results/2026-12-04-coldcompile)."""
    import jax
    import numpy as np
    value, reference_value = np.asarray(jax.jit(ours)(*args)), np.asarray(jax.jit(expected)(*args))
    if not np.allclose(value, reference_value, rtol=1e-9, atol=1e-12):
        raise BackendCheckError(f"the adoffload {what} gave {value!r}, the plain-JAX reference "
                                f"{reference_value!r}: a bug in adoffload (please report it)")


def _grid_and_shapes(name, args, outs):
    """Launch grid and Out shapes of a kernel call, from its (static) input shapes."""
    if name == "cell_ranges":
        n_cells = int(args[1])
        return n_cells, {"start": (n_cells,), "count": (n_cells,)}
    if name in ("cell_neighbors", "all_pairs_neighbors"):
        n, capacity = args[0].shape[0], int(args[8] if name == "cell_neighbors" else args[3])
        return n, {"neighbors": (n, capacity), "n_neighbors": (n,)}
    n = args[2].shape[0] if name in ("bond_energy", "angle_energy") else args[0].shape[0]
    if name.endswith("_energy_forces"):
        return n, {"e": (n,), "forces": (n, 3)}
    return n, {outs[0]: (n,)}


def _wrap(ado, name, kernel, outs, taken, platform):
    from . import kernels
    cache = {}

    def call(*args):
        grid, shapes = _grid_and_shapes(name, args, outs)
        key = (grid, tuple(sorted(shapes.items())))
        if key not in cache:
            chosen = kernel
            if name.endswith("_energy_forces"):      # a fused kernel: lanes per atom by size and platform
                lanes = kernels.lanes_per_atom(grid, platform)
                chosen, grid = getattr(kernels, f"{name}_kernel")(lanes), kernels.fused_grid(grid, lanes)
            cache[key] = ado.jax_kernel(chosen, grid=grid, out_shapes=shapes)
        return _outputs(cache[key](*(args if taken is None else args[:taken])), outs)

    call.__name__ = name
    return call


def _outputs(result, names):
    if isinstance(result, dict):
        values = tuple(result[n] for n in names)
    elif isinstance(result, (tuple, list)):
        values = tuple(result)
    else:
        values = (result,)
    return values[0] if len(names) == 1 else values
