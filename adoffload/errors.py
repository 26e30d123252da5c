"""Every error a user can cause, under one base class.

Each class also subclasses the matching built-in exception so that ``except TypeError``
keeps working for callers that do not know adoffload.
"""
from __future__ import annotations


class Error(Exception):
    """Base of every adoffload error."""


# --- kernel language (front end) --------------------------------------------------------

class SourceError(Error):
    """An error tied to a place in kernel source: prints file:line:col, the line and a caret."""

    def __init__(self, message: str, *, filename: str | None = None, line: int | None = None,
                 col: int | None = None, source_line: str | None = None, kernel: str | None = None):
        self.message = message
        self.filename, self.line, self.col = filename, line, col
        self.source_line, self.kernel = source_line, kernel
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.filename is not None and self.line is not None:
            where = f"{self.filename}:{self.line}:{(self.col or 0) + 1}: "
        text = f"{where}{self.message}"
        if self.kernel:
            text += f" (in kernel '{self.kernel}')"
        if self.source_line is not None:
            text += f"\n    {self.source_line.rstrip()}"
            if self.col is not None:
                text += "\n    " + " " * self.col + "^"
        return text


class UnsupportedConstructError(SourceError, NotImplementedError):
    """A Python construct the kernel language does not support."""


class KernelTypeError(SourceError, TypeError):
    """A type mismatch inside a kernel (e.g. indexing with a float, assigning f64 to an i32 variable)."""


class UndefinedNameError(SourceError, NameError):
    """A name used in a kernel that is neither a local, a parameter, a helper nor a global constant."""


# --- calling kernels --------------------------------------------------------------------

class ArgumentError(Error, TypeError):
    """A kernel called with wrong arguments: count, dtype, ndim, layout, scalar for array."""


class ShapeError(Error, ValueError):
    """Shapes that do not agree (e.g. a shadow whose shape differs from its primal)."""


class GridError(Error, ValueError):
    """A bad launch grid: negative, wrong rank, too large for the target."""


class BoundsError(Error, IndexError):
    """An array index out of bounds inside a kernel; names kernel, array, index and shape."""


# --- IR, AD, code generation ---------------------------------------------------------------

class IRError(Error, ValueError):
    """Malformed or unsupported LLVM IR (on import, or a verifier failure)."""


class CudaTranslationError(IRError):
    """A construct of a CUDA/HIP kernel's IR that ``ado.from_cuda`` does not translate (named in the message)."""


class UncheckableAccessError(IRError):
    """A CUDA kernel accesses memory through a pointer that cannot be traced to an array, so it cannot be bounds-checked."""


class IntentError(IRError):
    """A CUDA kernel writes an array its parameters declare read-only (``ado.In``)."""


class DivergentBarrierError(IRError):
    """A CUDA kernel's barrier or warp exchange runs under control flow that differs between threads of a block."""


class SharedMemoryRaceError(IRError):
    """Two threads of a block may touch one shared-memory element between the same two barriers, one
    of them writing (a race on a GPU, a silently wrong result on the host); names both accesses."""


class GlobalMemoryRaceError(SharedMemoryRaceError):
    """Two threads of a block may load and store one element of a global array between the same two
    barriers (an in-place update reading a neighbour's element); names both accesses."""


class VerificationError(IRError):
    """The IR verifier found an invalid instruction; the message shows it in context."""


class DifferentiationError(Error):
    """An operation on an active path that adoffload cannot differentiate."""


class CompilationError(Error, RuntimeError):
    """LLVM or a target tool (ptxas, ld.lld) failed on code adoffload produced."""


class ForeignCompileError(CompilationError):
    """clang refused a CUDA/HIP source given to ``ado.from_cuda``/``ado.from_hip``; the message is clang's."""


class ToolNotFoundError(Error, RuntimeError):
    """An optional tool (ptxas, libdevice, ld.lld) is not installed; the message says which extra brings it."""


# --- devices -------------------------------------------------------------------------------

class DeviceError(Error, RuntimeError):
    """A device or driver call failed (the driver's own error name is in the message)."""


class DeviceNotFoundError(DeviceError):
    """The requested device kind is not present on this machine."""


class OutOfMemoryError(DeviceError, MemoryError):
    """The device ran out of memory."""


class KernelFaultError(DeviceError):
    """A kernel trapped or faulted on the device."""


class ForeignPanicError(Error, RuntimeError):
    """Foreign host code reached a failure path it cannot return from (a Rust panic: an index out
    of bounds, an unwrap of None) that no loaded library defines; the call was abandoned."""


class CacheError(Error, OSError):
    """The on-disk compile cache could not be used (it is then bypassed, never trusted blindly)."""


class JaxIntegrationError(Error, TypeError):
    """Wrong shapes, dtypes or ranks given to a kernel used as a JAX function."""


# --- chemistry (adoffload.chemistry) ------------------------------------------------------

class NeighborListOverflowError(Error, RuntimeError):
    """An atom has more neighbors (or a cell more atoms) than the fixed capacity allows."""


class BackendUnavailableError(Error, RuntimeError):
    """The requested compute backend cannot run here (no such device, or its toolchain is missing)."""


class BackendCheckError(Error, RuntimeError):
    """The adoffload chemistry backend's self-check gave a wrong value (a bug in adoffload)."""


class OptionalDependencyError(Error, ImportError):
    """An optional extra (ASE, matplotlib) is needed for this feature and is not installed."""


class Float64RequiredError(Error, RuntimeError):
    """The chemistry code computes in float64; JAX must have ``jax_enable_x64`` switched on."""


class ParameterError(Error, ValueError):
    """A simulation parameter no integrator can use: a time step that is not positive and finite,
    a negative temperature or friction, a step count that is not a whole number."""


class UnstableSimulationError(Error, FloatingPointError):
    """A molecular-dynamics run produced non-finite positions or energies (a time step too large
    for the forces, or overlapping atoms); the message names the step reached."""


class BoxError(Error, ValueError):
    """A simulation box the code cannot handle (non-orthorhombic, too small for the cutoff)."""


class DomainOverflowError(Error, RuntimeError):
    """A fixed-capacity buffer of a domain decomposition (owned atoms, ghosts, migrants,
    neighbors) was too small; the results of that run are wrong and must not be used."""


class ShardingError(Error, ValueError):
    """A device or mesh request that cannot be met (more devices than visible, a batch that
    does not split evenly, a term that domain decomposition cannot move between devices)."""
