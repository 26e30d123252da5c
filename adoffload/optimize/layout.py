"""Which layout runs a ``minimize`` batch: one problem per thread, or one problem per warp.

* ``"thread"``: generate.minimize_kernel, the whole state in the thread's local memory.
* ``"warp"``: generate.minimize_warp_kernel (warp_code.py), the state in global scratch arrays, the
  vector algebra spread over the warp's lanes; L-BFGS, BFGS and FIRE.
* ``"auto"`` (the default) picks, by this rule:
  1. ``n > WARP_MAX_N``: thread (no warp layout).
  2. Otherwise thread, unless the thread kernel's local arrays (measured on its IR, as the launch
     checks them: kernels/local_memory.py) exceed the target's limit: then warp. On the host the warp
     layout runs a block as a loop over the lanes (no faster). On a GPU (one H100 run,
     benchmarks/results/2026-12-07-gpu/part_c) the warp layout was 2.4-20x faster for Rosenbrock at
     n >= 64 and 1.3x for LJ75 at batch 64; large batches of costly objectives and FIRE are not
     measured, so ``auto`` picks the warp layout only where the thread layout cannot run.
"""
from __future__ import annotations

from ..errors import ArgumentError
from . import bfgs, bfgs_warp, fire, fire_warp, lbfgs, lbfgs_warp

LAYOUTS = ("auto", "thread", "warp")
WARP_MODULES = {lbfgs: lbfgs_warp, bfgs: bfgs_warp, fire: fire_warp}
# The race checks prove the lane-strided accesses apart by enumerating the lanes' coordinates
# (analysis/races/proofs.py: at most 2^18 bytes for a pair of accesses), which bounds n
WARP_MAX_N = 16384
_TARGETS = {"cpu": "host", "cuda": "nvptx", "hip": "amdgpu"}


def check_layout(layout, module, what: str) -> str:
    if not isinstance(layout, str) or layout.lower() not in LAYOUTS:
        raise ArgumentError(f"{what}: unknown layout {layout!r}; choose one of 'auto', 'thread' (one problem per "
                            f"thread), 'warp' (one problem per warp)")
    layout = layout.lower()
    return layout


def check_warp(module, n: int, what: str) -> None:
    if module not in WARP_MODULES:
        raise ArgumentError(f"{what}: layout='warp' is built for method='lbfgs', 'bfgs' and 'fire', not "
                            f"'{module.__name__.rsplit('.', 1)[-1]}' (use layout='thread' or 'auto')")
    if n > WARP_MAX_N:
        raise ArgumentError(f"{what}: layout='warp' is built for n <= {WARP_MAX_N} parameters (the race checks "
                            f"enumerate the lanes' coordinates), got n={n}")


def target_of(device) -> tuple[str, int]:
    """(LLVM target name, warp size) of a device string ('cpu', 'cpu:wave64', 'cuda:1', 'hip', ...)."""
    text = str(device or "cpu").lower()
    if text.startswith("cpu:wave64"):
        return "host", 64
    kind = text.split(":", 1)[0]
    target = _TARGETS.get(kind, "host")
    return target, 64 if target == "amdgpu" else 32


def jax_device() -> str:
    """The device a JAX call runs on, as a device string: JAX's default backend."""
    import jax
    return "cuda" if jax.default_backend() == "gpu" else "cpu"


def choose(layout: str, module, n: int, batch: int, device, thread_kernel) -> str:
    """'thread' or 'warp' for an already checked ``layout``; ``thread_kernel()`` builds the thread
    layout's kernel (only called when its local memory decides)."""
    if layout != "auto":
        return layout
    if module not in WARP_MODULES or n > WARP_MAX_N:
        return "thread"
    target, _ = target_of(device)
    from ..kernels.local_memory import LOCAL_MEMORY_LIMITS, local_memory_bytes
    need = local_memory_bytes(thread_kernel().module_text())
    return "warp" if need > LOCAL_MEMORY_LIMITS[target] else "thread"
