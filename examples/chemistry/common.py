"""Small helpers shared by the chemistry examples: device choice, --help, progress, output, plotting."""
from __future__ import annotations

import argparse
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


def pick_backend(requested: str, device: str, *, second_order: bool = False, own_kernels: bool = False) -> str:
    """The backend to use on ``device``. 'auto' is adoffload, or the plain-JAX reference when
    adoffload cannot use that device here (said on the console). Any other failure of the
    adoffload kernels is raised, never hidden behind a fallback. ``own_kernels``: the example builds
    its own kernels (adoffload.optimize), so only the device is checked, not the chemistry backend's
    kernels, which it does not use (their checks compile and run a dozen kernels)."""
    from adoffload.chemistry import available, device_available

    def usable(name):
        if own_kernels and name == "adoffload":
            return device_available(device)
        return available(name, second_order=second_order, device=device)
    if requested != "auto":
        ok, why = usable(requested)
        if not ok:
            sys.exit(f"--backend {requested}: {why}")
        return requested
    ok, why = usable("adoffload")
    if ok:
        return "adoffload"
    print(f"note: --backend auto runs the plain-JAX reference backend: {why}")
    return "jax"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default; an option whose default depends on others (None
    here) says so in its own help text."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def progress(label: str):
    """A callback ``(done, total)``: a tqdm bar on a terminal, and plain lines (about every tenth
    of the work) when the output goes to a file or a pipe."""
    from tqdm import tqdm
    bar, started, reported = None, time.perf_counter(), -1

    def update(done, total):
        nonlocal bar, reported
        if sys.stderr.isatty():
            if bar is None:
                bar = tqdm(total=total, desc=label)
            bar.update(done - bar.n)
            if done >= total:
                bar.close()
            return
        tenth = 10 * done // max(total, 1)
        if tenth > reported:
            reported = tenth
            print(f"{label}: {done}/{total} ({time.perf_counter() - started:.1f} s)", flush=True)
    return update


def output_folder(path: str) -> str:
    """Create the output folder named on the command line; returns its absolute path."""
    path = os.path.abspath(path)
    os.makedirs(path, exist_ok=True)
    return path


def save_plot(path, draw, size=(6, 4)):
    """Draw with matplotlib (Agg) into ``path``; returns the path, or None when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot written (pip install matplotlib)")
        return None
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig = plt.figure(figsize=size)
    draw(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
