"""Errors raised by the chemistry package (all under ``adoffload.errors.Error``).

They live here rather than in ``adoffload/errors.py`` only because that file is owned by
the core; they can move there unchanged.
"""
from __future__ import annotations

from ..errors import Error


class NeighborListOverflowError(Error, RuntimeError):
    """An atom has more neighbors (or a cell more atoms) than the fixed capacity allows."""


class BackendUnavailableError(Error, RuntimeError):
    """The requested compute backend cannot run here (e.g. the kernel compiler is missing)."""


class OptionalDependencyError(Error, ImportError):
    """An optional extra (ASE, matplotlib) is needed for this feature and is not installed."""


class Float64RequiredError(Error, RuntimeError):
    """The chemistry code computes in float64; JAX must have ``jax_enable_x64`` switched on."""


class BoxError(Error, ValueError):
    """A simulation box the code cannot handle (non-orthorhombic, too small for the cutoff)."""
