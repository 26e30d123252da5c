"""Small helpers shared by the chemistry examples: device choice, progress bar, plotting."""
from __future__ import annotations

import os
import sys
import time


def setup_jax(device: str):
    """Enable float64 and return the JAX device for ``device`` ('cpu' or 'cuda'), or exit with a reason."""
    import jax
    jax.config.update("jax_enable_x64", True)
    platform = {"cpu": "cpu", "cuda": "gpu"}[device]
    try:
        devices = jax.local_devices(backend=platform)      # this process's own (under jax.distributed too)
    except RuntimeError:
        devices = []
    if not devices:
        sys.exit(f"--device {device}: JAX finds no {platform} device on this machine")
    return devices[0]


def pick_backend(requested: str, *, second_order: bool = False) -> str:
    """'auto' -> adoffload if its kernels (and, if asked, gradients of forces) run here, else
    the JAX reference (said aloud)."""
    from adoffload.chemistry import available
    if requested != "auto":
        ok, why = available(requested, second_order=second_order)
        if not ok:
            sys.exit(f"--backend {requested}: {why}")
        return requested
    ok, why = available("adoffload", second_order=second_order)
    if ok:
        return "adoffload"
    print(f"note: running the plain-JAX reference backend ({why})")
    return "jax"


def progress(label: str):
    """A callback ``(done, total)``: tqdm when installed, else a one-line text bar."""
    try:
        from tqdm import tqdm
        bar = None

        def update(done, total):
            nonlocal bar
            if bar is None:
                bar = tqdm(total=total, desc=label)
            bar.update(done - bar.n)
            if done == total:
                bar.close()
        return update
    except ImportError:
        started = time.perf_counter()

        def update(done, total):
            width = 30
            filled = int(width * done / total)
            elapsed = time.perf_counter() - started
            sys.stdout.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:6.1f}s")
            if done == total:
                sys.stdout.write("\n")
            sys.stdout.flush()
        return update


def save_plot(path, draw):
    """Draw with matplotlib (Agg) into ``path``; returns the path, or None when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot written (pip install matplotlib)")
        return None
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig = plt.figure(figsize=(6, 4))
    draw(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
