"""examples/research/learned_pair_potential.py as a module, loaded once (tests of the engine use its
kernel: a Morse energy whose parameters are a row of a 3-row table per pair type)."""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

PATH = Path(__file__).resolve().parents[2] / "examples" / "research" / "learned_pair_potential.py"


@functools.cache
def research_example():
    spec = importlib.util.spec_from_file_location("learned_pair_potential_example", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
