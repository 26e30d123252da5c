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
from .errors import BackendUnavailableError

BACKENDS = ("adoffload", "jax")

# Backend function -> (its kernel's Out names, how many leading arguments the kernel takes;
# None = all). The trailing arguments the reference needs are static sizes that the kernel
# reads from its Out shapes instead.
_KERNEL_TABLE = {
    "lj_energy":           (("e",), None),
    "morse_energy":        (("e",), None),
    "coulomb_energy":      (("e",), None),
    "cluster_lj_energy":   (("e",), None),
    "bond_energy":         (("e",), None),
    "angle_energy":        (("e",), None),
    "cell_index":          (("cell",), None),
    "cell_ranges":         (("start", "count"), 1),              # (sorted_cells | n_cells)
    "cell_neighbors":      (("neighbors", "n_neighbors"), 8),    # (... cutoff | capacity, max_per_cell)
    "all_pairs_neighbors": (("neighbors", "n_neighbors"), 3),    # (pos, box, cutoff | capacity)
}


def get_backend(name: str = "adoffload") -> SimpleNamespace:
    """The functions of backend ``name`` (``"adoffload"`` or ``"jax"``) as attributes."""
    if name == "jax":
        return SimpleNamespace(name="jax", **{f: getattr(reference, f) for f in _KERNEL_TABLE})
    if name == "adoffload":
        return _kernel_backend()
    raise BackendUnavailableError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")


def available(name: str) -> tuple[bool, str]:
    """Whether backend ``name`` can run here, and why not."""
    try:
        get_backend(name)
    except BackendUnavailableError as error:
        return False, str(error)
    return True, ""


def default_backend() -> str:
    """``"adoffload"`` when the kernel compiler is usable here, else ``"jax"``."""
    return "adoffload" if available("adoffload")[0] else "jax"


@functools.cache
def _kernel_backend() -> SimpleNamespace:
    import adoffload as ado
    missing = [n for n in ("kernel", "func", "jax_kernel", "vjp") if not hasattr(ado, n)]
    if missing:
        raise BackendUnavailableError(
            "the adoffload backend needs ado." + ", ado.".join(missing) + " which this build does not provide; "
            "use backend='jax' (the plain-JAX reference)")
    try:
        from . import kernels
    except Exception as error:          # a front-end error in our kernels must say where it came from
        raise BackendUnavailableError(f"the chemistry kernels did not compile: {error}") from error
    functions = {name: _wrap(ado, name, getattr(kernels, name), outs, taken)
                 for name, (outs, taken) in _KERNEL_TABLE.items()}
    backend = SimpleNamespace(name="adoffload", **functions)
    _smoke_test(backend)
    return backend


def _smoke_test(backend) -> None:
    """Compile and run one energy kernel and its adjoint on two atoms; any failure means unavailable."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    pos = np.array([[0.0, 0.0, 0.0], [1.1, 0.2, -0.1]])
    try:
        energy = lambda x: jnp.sum(backend.cluster_lj_energy(x, 1.0, 1.0))
        value, gradient = jax.value_and_grad(energy)(jnp.asarray(pos, dtype=jnp.float64))
        expected = float(jnp.sum(reference.cluster_lj_energy(jnp.asarray(pos), 1.0, 1.0)))
    except Exception as error:
        raise BackendUnavailableError(
            f"the adoffload kernels do not run here yet ({type(error).__name__}: {error}); "
            "use backend='jax' (the plain-JAX reference)") from error
    if not np.isclose(float(value), expected, rtol=1e-9) or not np.all(np.isfinite(np.asarray(gradient))):
        raise BackendUnavailableError(f"the adoffload LJ kernel gave {float(value)!r}, the reference {expected!r}")


def _grid_and_shapes(name, args, outs):
    """Launch grid and Out shapes of a kernel call, from its (static) input shapes."""
    if name == "cell_ranges":
        n_cells = int(args[1])
        return n_cells, {"start": (n_cells,), "count": (n_cells,)}
    if name in ("cell_neighbors", "all_pairs_neighbors"):
        n, capacity = args[0].shape[0], int(args[8] if name == "cell_neighbors" else args[3])
        return n, {"neighbors": (n, capacity), "n_neighbors": (n,)}
    n = args[2].shape[0] if name in ("bond_energy", "angle_energy") else args[0].shape[0]
    return n, {outs[0]: (n,)}


def _wrap(ado, name, kernel, outs, taken):
    cache = {}

    def call(*args):
        grid, shapes = _grid_and_shapes(name, args, outs)
        key = (grid, tuple(sorted(shapes.items())))
        if key not in cache:
            cache[key] = ado.jax_kernel(kernel, grid=grid, out_shapes=shapes)
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
