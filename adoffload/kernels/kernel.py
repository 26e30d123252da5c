"""Kernels: what ``@ado.kernel`` returns, and derivative kernels built from them.

A Kernel knows its signature and how to produce the canonical LLVM IR of its body; it
compiles that body per target on demand and launches it with numpy arrays, moving data
by intent. Derivative kernels (``ado.jvp``/``ado.vjp``) and batched kernels are Kernels
too, so everything downstream (launch, JAX, further differentiation) treats them alike.
"""
from __future__ import annotations

import json
import operator
import threading
from dataclasses import dataclass, field

from .. import ir
from . import tape_scan
from .arguments import derivative_width, derivative_wrt
from .launch import launch
from ..language.signature import KernelSignature


@dataclass
class Compiled:
    """A kernel variant compiled for one target: the artifact and its entry point."""
    target: str
    entry_name: str
    artifact: object                  # HostProgram | PTX text | HSACO bytes
    flat_types: list[str]
    grid_rank: int
    extra: dict = field(default_factory=dict)
    elements_per_thread: int = 1      # GPU entries: launch ceil(total / this) threads (codegen/gpu/vectorize.py)
    grid_stride: bool = False         # GPU entry loops over the grid: any thread count is correct (codegen/gpu/grid_stride.py)
    row_launch: bool = False          # GPU entry of a rank-2/3 grid accepts a row launch (codegen/gpu/rows.py)

    @property
    def program(self):
        return self.artifact

    @property
    def ptx(self) -> str:
        return self.artifact

    @property
    def hsaco(self) -> bytes:
        return self.artifact

    def pending_cubin(self, arch: str):
        """ptxas assembling this PTX for ``arch`` in a subprocess, started on the first call
        (codegen/gpu/cubin.py): loaders call it early, so it runs beside their other work. Where no
        -O3 cubin is cached, -O1 and -O3 run at once (codegen/gpu/tiered.py; ``result()`` waits for
        the first tier only)."""
        from ..codegen.gpu.tiered import start_tiered
        with _CUBIN_LOCK:
            pending = self.extra.setdefault("cubin", {})
            if arch not in pending:
                pending[arch] = start_tiered(self.ptx, arch)
            return pending[arch]

    def load_cuda(self, arch: str, load):
        """``load(image)`` of this PTX's -O3 cubin for ``arch`` (waited for), or of the PTX (the
        driver's JIT) where there is none (codegen/gpu/cubin.load_cuda_module)."""
        from ..codegen.gpu.cubin import load_cuda_module
        return load_cuda_module(self.ptx, arch, load, self.pending_cubin(arch))

    def load_cuda_tiered(self, arch: str, load):
        """``(module, upgrade)``: ``load`` of the first cubin there is (-O1 while -O3 is assembled)
        and the ``tiered.Upgrade`` the loader starts with its swap, or None
        (codegen/gpu/tiered.load_tiered)."""
        from ..codegen.gpu.tiered import load_tiered
        return load_tiered(self.ptx, arch, load, self.pending_cubin(arch), self.entry_name)


_CUBIN_LOCK = threading.Lock()


class Kernel:
    """Base class: a signature plus a way to get the body's canonical IR for a set of proven facts."""

    signature: KernelSignature
    tape = None                # a reverse kernel's tape protocol (enzyme.tape), None for most kernels
    block: tuple[int, ...] | None = None   # a block kernel's block shape (frontend/blocks.py)
    shared: tuple = ()         # a block kernel's shared arrays (SharedArray), in body-argument order
    launch_block: int | None = None   # a plain kernel's threads per GPU block (None: the occupancy
                                      # calculator's; JAX: 256); adoffload.optimize sets 32

    def __init__(self, signature: KernelSignature, body_name: str):
        self.signature = signature
        self.body_name = body_name
        self._lock = threading.RLock()
        self._texts: dict[frozenset, str] = {}
        self._compiled: dict[tuple, Compiled] = {}

    @property
    def name(self) -> str:
        return self.signature.name

    # ---- IR ---------------------------------------------------------------------------
    @property
    def candidate_facts(self) -> frozenset:
        """(param_index, dim, axis) facts whose bounds check the launcher may prove away."""
        return frozenset()

    @property
    def full_writes(self) -> frozenset:
        """(param_index, axes): Out arrays every thread writes at its own index (frontend/coverage.py),
        which need no zeroing when the grid equals their shape."""
        return frozenset()

    @property
    def thread_indexed(self) -> frozenset:
        """(param_index, dim, axis): array dims indexed by exactly the thread id of a grid axis, also
        without bounds checks (``ado.jax_kernel`` derives Out shapes from them)."""
        return self.candidate_facts

    _last_plan = None
    """The plan of this kernel's most recent cacheable numpy launch (kernels/launch_plan.py), checked first."""

    seed_params: frozenset = frozenset()
    """Names of params the kernel reads as a seed and clears (a reverse kernel's ``d_<out>``):
    the numpy launcher passes them copies, so the caller's seed is kept."""

    def _make_text(self, proven: frozenset) -> str:
        raise NotImplementedError(f"{type(self).__name__} must define _make_text")

    def module_text(self, proven: frozenset = frozenset()) -> str:
        """Canonical LLVM IR text of the body module (checks in ``proven`` removed)."""
        proven = frozenset(proven) & self.candidate_facts
        with self._lock:
            if proven not in self._texts:
                self._texts[proven] = self._make_text(proven)
            return self._texts[proven]

    @property
    def lean_dropped(self) -> frozenset[int]:
        """The outputs a lean forward derivative of this kernel does not store (enzyme/lean.py), from
        the body alone (imported without the module's other functions); computed once."""
        with self._lock:
            if "_lean_dropped" not in self.__dict__:
                from ..enzyme.kernels import lean_dropped
                module = ir.import_module(self.module_text(), bodies=(self.body_name,))
                self._lean_dropped = lean_dropped(self.signature, module, self.body_name,
                                                  self.shared if self.block is not None else ())
            return self._lean_dropped

    def ir(self, proven: frozenset = frozenset()):
        """(ir.Module, body name) for this kernel's body."""
        return ir.import_module(self.module_text(proven)), self.body_name

    # ---- compile ----------------------------------------------------------------------
    def compiled(self, target: str = "host", *, arch: str | None = None, scalars_by_reference: bool = False,
                 proven: frozenset = frozenset(), **options) -> Compiled:
        """``options`` go to ``codegen.compile_for_target`` (``noalias``, ``reductions``,
        ``elements_per_thread``, ...)."""
        from .. import codegen
        proven = frozenset(proven) & self.candidate_facts
        if self.block is not None:
            options.update(block=self.block, shared=tuple((a.nbytes, a.zero) for a in self.shared))
            if getattr(self, "deterministic", False):       # shared-memory adds in thread order on GPUs
                options["ordered_shared_adds"] = True
        if getattr(self, "deterministic", False):           # atomics keep their per-thread form
            options["lane_combining"] = False
        options = codegen.normalize_options(options, target, self.signature.grid_rank)
        key = (target, arch, scalars_by_reference, proven, tuple(sorted(options.items())))
        with self._lock:
            hit = self._compiled.get(key)
            if hit is not None:
                return hit
            from .local_memory import check_local_memory
            check_local_memory(self.name, self.module_text(proven), target)
            flat = self.signature.flat_params()
            flat_types = [f.llvm_type for f in flat]
            # By reference means the kernel's scalar parameters only; array shapes stay values.
            by_reference = [k for k, f in enumerate(flat) if f.role == "scalar"] if scalars_by_reference else False
            artifact = codegen.compile_for_target(
                self.module_text(proven), self.body_name, flat_types, self.signature.grid_rank,
                target, arch=arch, scalars_by_reference=by_reference, **options)
            entry = codegen.kernel_symbol(self.body_name, target)
            compiled = Compiled(target, entry, artifact, flat_types, self.signature.grid_rank,
                                elements_per_thread=options.get("elements_per_thread", 1),
                                grid_stride=codegen.loops_over_grid(artifact),
                                row_launch=codegen.launches_rows(artifact))
            if self.block is not None:
                from ..codegen.blocks import block_threads
                compiled.extra["block_threads"] = block_threads(self.block)
            elif self.launch_block is not None and target != "host":
                compiled.extra["block_threads"] = self.launch_block
            self._compiled[key] = compiled
            return compiled

    # ---- launch -----------------------------------------------------------------------
    @staticmethod
    def scan_kernels() -> dict:
        """tape_scan.py's kernels, compiled on first use: the launcher scans dynamic-tape counts with them."""
        return scan_kernels()

    def _python_call(self, *args, grid=None, device="cpu", **kwargs):
        """The Python path of a launch (``__call__`` without a native entry, or where it does not apply)."""
        if grid is None:
            from ..errors import GridError
            raise GridError(f"kernel '{self.name}' needs grid=: the number of threads to launch, an int "
                            f"(e.g. grid=x.shape[0]) or a tuple of {self.signature.grid_rank} ints")
        return launch(self, args, kwargs, grid, device)

    _call = _python_call
    """What a call of the kernel runs: the Python path, or (an instance attribute) the head of its chain
    of native entries of host plans (kernels/native_entry.py): each hands any launch it does not match
    to the next, the last to the Python path."""

    __call__ = property(operator.attrgetter("_call"), doc="""\
``kernel(*args, grid=, device="cpu", **kwargs)``: run the kernel over ``grid`` with numpy arrays
(moved to ``device`` and back by intent). A property, so that a call reaches the native entry
without a Python frame: ``kernel.__call__`` is that entry or the bound Python path.""")

    @property
    def __signature__(self):
        """What ``inspect.signature`` shows (``__call__`` being a property): the kernel function's own
        parameters where there is one, else the Python path's."""
        import inspect
        wrapped = self.__dict__.get("__wrapped__")
        return inspect.signature(wrapped if wrapped is not None else self._python_call)

    @classmethod
    def from_ir(cls, signature: KernelSignature, module_text: str, body_name: str, *, tape=None) -> "Kernel":
        return IRKernel(signature, module_text, body_name, tape=tape)

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.type!r}" for p in self.signature.params)
        return f"<{type(self).__name__} {self.name}({params}) grid_rank={self.signature.grid_rank}>"


class SourceKernel(Kernel):
    """A kernel written in the kernel language (``@ado.kernel``)."""

    def __init__(self, pyfunc, *, bounds_check: bool = True, block=None):
        from .. import frontend
        self.pyfunc = pyfunc
        self.bounds_check = bounds_check
        source = frontend.compile_kernel(pyfunc, bounds_check=bounds_check, block=block)
        super().__init__(source.signature, source.signature.name)
        self.block, self.shared = source.block, source.shared
        self._candidates = frozenset(source.candidate_facts) if bounds_check else frozenset()
        self._thread_indexed = frozenset(source.candidate_facts)
        self._full_writes = source.full_writes
        self.loaded_and_stored = source.loaded_and_stored
        self._texts[frozenset()] = _canonical_body(source.llvm_ir)
        if self.block is not None:
            from ..analysis.races.kernel import check_block_kernel
            rank = len(self.block)
            check_block_kernel(self, ["thread_id()"] if rank == 1 else [f"thread_id()[{a}]" for a in range(rank)],
                               style="ado")
        else:
            from ..analysis.races.kernel import check_plain_kernel
            check_plain_kernel(self)
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc

    @property
    def candidate_facts(self) -> frozenset:
        return self._candidates

    @property
    def thread_indexed(self) -> frozenset:
        return self._thread_indexed

    @property
    def full_writes(self) -> frozenset:
        return self._full_writes

    def _make_text(self, proven: frozenset) -> str:
        from .. import frontend
        source = frontend.compile_kernel(self.pyfunc, bounds_check=self.bounds_check, proven=proven,
                                         block=self.block)
        return _canonical_body(source.llvm_ir)


def _canonical_body(llvm_ir: str) -> str:
    """Canonical IR of a front-end module, with ``ado.grad(f)``-style calls defined (enzyme/inner.py)."""
    from ..enzyme.inner import resolve_inner_derivatives
    return resolve_inner_derivatives(ir.canonicalize(llvm_ir))


class IRKernel(Kernel):
    """A kernel given directly as body IR (batched variants, foreign kernels)."""

    def __init__(self, signature: KernelSignature, module_text: str, body_name: str, *, tape=None):
        super().__init__(signature, body_name)
        self._texts[frozenset()] = module_text
        self.tape = tape

    def _make_text(self, proven: frozenset) -> str:
        return self._texts[frozenset()]


class DerivedKernel(Kernel):
    """A forward (``jvp``) or reverse (``vjp``) derivative of another kernel, derived per proven-fact set."""

    def __init__(self, base: Kernel, mode: str, wrt: tuple[str, ...], *, width: int = 1,
                 deterministic: bool = False, primal_outputs: bool = True, lazy: bool = False):
        self.base, self.mode, self.wrt = base, mode, tuple(wrt)
        self.width, self.deterministic, self.primal_outputs = width, deterministic, primal_outputs
        self.block = base.block
        if base.block is not None:
            from ..enzyme.blocks import derived_shared
            self.shared = derived_shared(base.shared, mode, width)
        if lazy and mode == "jvp" and not deterministic:
            # Only the signature now (what a JAX tangent call's abstract evaluation needs); the
            # derivation, and any DifferentiationError of it, on first use of the body (module_text)
            from ..enzyme.kernels import jvp_signature
            dropped = frozenset() if primal_outputs else base.lean_dropped
            signature, body_name = jvp_signature(base.signature, base.body_name, list(self.wrt), width, dropped)
            super().__init__(signature, body_name)
            self.tape = None              # a forward kernel has no tape of its own
            return
        derived = self._derive(frozenset())
        super().__init__(derived.signature, derived.body_name)
        self._texts[frozenset()] = derived.text
        self.tape = derived.tape

    @property
    def body_derived(self) -> bool:
        """Whether the body is derived already (a lazy forward kernel's is not until first used)."""
        return frozenset() in self._texts

    def ensure_derived(self) -> "DerivedKernel":
        """Derive the body now if it is not yet (raising what the derivation raises); returns self."""
        self.module_text()
        return self

    @property
    def candidate_facts(self) -> frozenset:
        return self.base.candidate_facts

    @property
    def seed_params(self) -> frozenset:
        """A reverse kernel's seeds ``d_<out>`` (the shadows of the base's Out arrays, ``d2_<out>`` of a
        second derivative), and in any derivative the base's own seeds, which its primal clears."""
        from .shadows import own_shadows
        written = {p.name for p in self.signature.params if p.is_array and p.type.writes}
        seeds = {name for name in getattr(self.base, "seed_params", ()) if name in written}
        if self.mode == "vjp":
            base_params, params = self.base.signature.params, self.signature.params
            seeds |= {params[shadow].name for shadow, primal in own_shadows(self)
                      if base_params[primal].is_array and base_params[primal].type.intent == "out"
                      and params[shadow].name in written}
        return frozenset(seeds)

    @property
    def thread_indexed(self) -> frozenset:
        """The base's, and the same for each shadow ``d_<name>`` shaped like its primal."""
        facts = set(self.base.thread_indexed)
        if self.mode == "vjp" or self.width == 1:
            base_params = self.base.signature.params
            names = [p.name for p in self.signature.params]
            for param, dim, axis in self.base.thread_indexed:
                shadow = f"d_{base_params[param].name}"
                if shadow in names[len(base_params):]:
                    facts.add((names.index(shadow, len(base_params)), dim, axis))
        return frozenset(facts)

    @property
    def full_writes(self) -> frozenset:
        """The base's, and in forward mode (width 1) their tangents too: the tangent is stored
        wherever the primal value is."""
        writes = set(self.base.full_writes)
        if self.mode == "jvp" and self.width == 1:
            names = [p.name for p in self.signature.params]
            for k, axes in self.base.full_writes:
                shadow = f"d_{self.base.signature.params[k].name}"
                if shadow in names[len(self.base.signature.params):]:
                    writes.add((names.index(shadow, len(self.base.signature.params)), axes))
        return frozenset(writes)

    def _derive(self, proven: frozenset):
        """Differentiate the base body (or reuse the on-disk result for the same base IR)."""
        from ..codegen.cache import CompileCache
        from ..enzyme.kernels import TapeKernel, derive_kernel
        base_text = self.base.module_text(proven)
        key = ["derived", base_text, self.base.body_name, self.mode, list(self.wrt), self.width, self.deterministic]
        if not self.primal_outputs:
            key.append("lean")
        cache = CompileCache()
        hit = cache.get(key)
        if hit is not None:
            data = json.loads(hit)
            tape = data["tape"] and TapeKernel(KernelSignature.from_json(data["tape"][0]), data["tape"][1])
            return _Derived(KernelSignature.from_json(data["signature"]), data["body_name"], data["text"], tape)
        module = ir.import_module(base_text)
        result = derive_kernel(self.base.signature, module, self.base.body_name, self.mode, list(self.wrt),
                               width=self.width, deterministic=self.deterministic,
                               shared=self.base.shared if self.base.block is not None else (),
                               primal_outputs=self.primal_outputs)
        text = ir.canonicalize(ir.export_module(result.module))
        tape = result.tape and [result.tape.signature.to_json(), result.tape.body_name]
        cache.put(key, json.dumps({"signature": result.signature.to_json(), "body_name": result.body_name,
                                   "text": text, "tape": tape}).encode())
        return _Derived(result.signature, result.body_name, text, result.tape)

    def _make_text(self, proven: frozenset) -> str:
        if proven:
            # a lazy kernel derives its unproven body first, as the eager one did on construction: its
            # DifferentiationErrors, and the check of the signature computed without the AD
            self.module_text(frozenset())
        derived = self._derive(proven)
        if derived.signature != self.signature or derived.body_name != self.body_name \
                or _tape_key(derived.tape) != _tape_key(self.tape):
            if not proven:          # a lazy kernel's signature, computed without the derivation, is wrong
                from ..errors import Error
                raise Error(f"internal: kernel '{self.name}': the derived signature {derived.signature} or body "
                            f"'{derived.body_name}' differs from the one computed before deriving "
                            f"({self.signature}, '{self.body_name}')")
            # Without some bounds checks the derivative may need a different tape (static
            # instead of dynamic, or the reverse); the launcher sizes the tape from this
            # kernel's protocol, so such a variant keeps its checks.
            return self.module_text(frozenset())
        return derived.text

    @property
    def count_kernel(self) -> "Kernel":
        """The kernel that sizes this reverse kernel's dynamic tape (None without one)."""
        if self.tape is None:
            return None
        with self._lock:
            if "_count_kernel" not in self.__dict__:
                self._count_kernel = TapeCountKernel(self)
            return self._count_kernel


    @property
    def base_count_kernel(self) -> "Kernel":
        """The kernel that sizes the base's dynamic tape when this differentiates a reverse kernel
        with one (second order: this kernel takes that tape and its shadow), else None."""
        return self.base.count_kernel if getattr(self.base, "tape", None) is not None else None


class TapeCountKernel(Kernel):
    """Runs the primal of a reverse kernel per thread and records its tape size (enzyme/tape.py)."""

    def __init__(self, derived: DerivedKernel):
        super().__init__(derived.tape.signature, derived.tape.body_name)
        self.derived = derived
        self.block, self.shared = derived.base.block, derived.base.shared
        # the primal it re-runs must take the path the deterministic kernel's does (ordered shared adds)
        self.deterministic = derived.deterministic

    @property
    def candidate_facts(self) -> frozenset:
        return self.derived.candidate_facts

    def _make_text(self, proven: frozenset) -> str:
        return self.derived.module_text(proven)


def _tape_key(tape):
    return None if tape is None else (tape.signature, tape.body_name)


@dataclass
class _Derived:
    signature: KernelSignature
    body_name: str
    text: str
    tape: object


def kernel(fn=None, *, bounds_check: bool = True, block=None):
    """Decorator: compile a Python function in the kernel language (``@ado.kernel`` or ``@ado.kernel(...)``).

    ``block=(b0, ...)`` makes a block kernel: its threads run in blocks of that shape which share
    ``ado.shared`` arrays and synchronize with ``ado.sync_threads()`` (frontend/blocks.py); the
    grid must then be a multiple of the block on every axis."""
    if block is not None:
        from ..frontend.blocks import check_block
        block = check_block(block, getattr(fn, "__name__", "kernel"))
    if fn is None:
        return lambda f: SourceKernel(f, bounds_check=bounds_check, block=block)
    return SourceKernel(fn, bounds_check=bounds_check, block=block)


def jvp(k: Kernel, wrt=None, *, width: int | None = None, primal_outputs: bool = True, argnums=None) -> Kernel:
    """The forward-mode (tangent) kernel of ``k`` with respect to the parameters named in ``wrt``.

    It takes ``k``'s parameters, then one shadow per differentiated or written float parameter,
    by keyword ``d_<name>``:

    * ``d_<scalar>`` (a float) and ``d_<in>`` (an array shaped like ``<in>``): tangents, read;
    * ``d_<out>``: the tangent of ``<out>``, written (it starts at zero like Out arrays);
    * ``d_<inout>``: the tangent of the input on entry, of the output on return.

    With ``width=K`` each shadow gets a leading axis of K (K tangents at once; default 1, no axis).

    ``primal_outputs=False`` gives the tangent-only kernel (what ``jax.jvp`` and ``jax.linearize``
    of a kernel call use, next to the primal call): a written array whose stores the kernel
    never reads back is not stored to and becomes an ``In`` parameter (an Out one is not read
    either: pass the primal output, or any array of its shape; an InOut one is read as its
    input); tangents are unchanged (enzyme/lean.py).

    ``ado.jvp(f)`` of an ``@ado.func`` helper is its forward derivative, called inside kernels
    as ``y, dy = ado.jvp(f)(x1..xn, dx1..dxn)`` (``language.FuncDerivative``); ``argnums=(0, 3)``
    takes the tangents of those arguments only, and ``width=K`` K tangents at once (array
    arguments: each tangent array with a leading axis of K; docs/language.md: array arguments).
    """
    from ..language.builtins import Func, helper_jvp
    if isinstance(k, Func):
        if wrt is not None or not primal_outputs:
            from ..errors import ArgumentError
            raise ArgumentError(f"ado.jvp({k.__name__}) of a helper takes the helper alone (and "
                                f"argnums=, width=); call the result inside a kernel with (x1..xn, dx1..dxn)")
        return helper_jvp(k, argnums, width)
    if argnums is not None:
        from ..errors import ArgumentError
        raise ArgumentError("ado.jvp(kernel, wrt): argnums= is for helpers (@ado.func); name a kernel's "
                            "parameters in wrt")
    if wrt is None:
        from ..errors import ArgumentError
        raise ArgumentError("ado.jvp(kernel, wrt) needs the names of the parameters to differentiate")
    return _derived(k, "jvp", wrt, width=1 if width is None else width,
                    **({} if primal_outputs else {"primal_outputs": False}))


jvp.__ado_compile_time__ = True      # ado.jvp(f) inside a kernel is evaluated while compiling


def lazy_jvp(k: Kernel, wrt, *, primal_outputs: bool = True) -> Kernel:
    """``jvp(k, wrt, primal_outputs=...)`` whose body is derived on first use (its ``module_text``:
    compiling or launching it, batching it), not now: its signature comes without the AD. What the
    JAX rules bind for a tangent call that ``jax.grad`` only transposes, never runs. The same kernel
    object as ``jvp``'s (an eager ``jvp`` of it later derives it, raising what the derivation raises);
    the DifferentiationErrors of the derivation come on first use, ArgumentErrors at once."""
    if not isinstance(k, Kernel):
        return jvp(k, wrt, primal_outputs=primal_outputs)
    return _derived(k, "jvp", wrt, width=1, lazy=True, **({} if primal_outputs else {"primal_outputs": False}))


def vjp(k: Kernel, wrt, *, deterministic: bool = False, primal_outputs: bool = True) -> Kernel:
    """The reverse-mode (adjoint) kernel of ``k`` with respect to the parameters named in ``wrt``.

    It runs ``k`` and then its adjoint. It takes ``k``'s parameters, then one shadow per
    differentiated or written float parameter, by keyword ``d_<name>``:

    * ``d_<out>`` (shaped like ``<out>``): the seed, read. The numpy launcher gives the kernel a
      copy, so the caller's seed is kept and can be reused (a seed already in GPU memory is
      used in place and ends up zero);
    * ``d_<in>`` and ``d_<scalar>`` (a 1-element array): the gradients, accumulated (``+=``):
      zero them before a call that should not add to earlier ones;
    * ``d_<inout>``: InOut arrays are both: the seed of the output on entry, overwritten with
      the gradient with respect to the input.

    ``deterministic=True`` makes the gradients bitwise reproducible (docs/determinism.md).

    ``primal_outputs=False`` gives the lean adjoint (what the JAX transpose rule uses): a written
    array whose stores the kernel never reads back is not stored to and becomes an ``In``
    parameter, as for ``jvp``; the seed ``d_<out>`` of such an Out array becomes ``In`` (read,
    left as it was) when no element of ``<out>`` can be stored twice in a launch, and so does
    any seed the adjoint only reads; other seeds are consumed as above. The gradient ``d_<in>``
    of an In array each element of which only its own thread loads (outside loops) becomes
    ``Out``: written, not accumulated, where the lean kernel can order its updates
    (enzyme/lean.py)."""
    return _derived(k, "vjp", wrt, deterministic=deterministic,
                    **({} if primal_outputs else {"primal_outputs": False}))


_DERIVED_CACHE: dict = {}
_DERIVED_LOCK = threading.Lock()


def _derived(k: Kernel, mode: str, wrt, **options) -> Kernel:
    from ..errors import ArgumentError
    lazy = options.pop("lazy", False)      # a forward kernel's signature now, its body on first use
    wrt = derivative_wrt(mode, wrt)
    if options.get("width") is not None:
        options["width"] = derivative_width(mode, options["width"])
    derive = getattr(k, "__ado_derive__", None)
    if derive is not None and not isinstance(k, Kernel):       # CUDA kernels (sources/cuda/kernel.py)
        return derive(mode, wrt, **options)
    if not isinstance(k, Kernel):
        raise ArgumentError(f"ado.{mode} expects a kernel made with @ado.kernel, got {type(k).__name__}")
    key = (id(k), mode, wrt, tuple(sorted(options.items())))
    with _DERIVED_LOCK:
        hit = _DERIVED_CACHE.get(key)
    if hit is not None and hit.base is k:
        return hit if lazy else hit.ensure_derived()    # an eager request derives (and raises) now
    derived = DerivedKernel(k, mode, wrt, lazy=lazy, **options)
    with _DERIVED_LOCK:
        _DERIVED_CACHE[key] = derived
    return derived


_SCAN_KERNELS: dict = {}


def scan_kernels() -> dict:
    """{name: kernel} of tape_scan.SCAN_KERNELS, made once per process."""
    with _SCAN_LOCK:
        if not _SCAN_KERNELS:
            _SCAN_KERNELS.update({name: SourceKernel(getattr(tape_scan, name)) for name in tape_scan.SCAN_KERNELS})
        return _SCAN_KERNELS


_SCAN_LOCK = threading.Lock()
