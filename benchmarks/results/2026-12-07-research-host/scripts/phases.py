"""Timers around the first training step's stages (no profiler), fresh process.

ORDER=pk (default: plain JAX first, JAX's warm-up outside the kernel step) or kp (the example's order).
Prints each first step's seconds, then per stage: total seconds and calls; ``import_module`` is split
by its caller. Nested stages overlap (a stage's time includes the stages it calls).
Run from the repository root with an empty ADOFFLOAD_CACHE_DIR.
"""
import collections, functools, importlib, os, sys, time
sys.path.insert(0, "examples/research")
import jax
jax.config.update("jax_enable_x64", True)
import learned_pair_potential as ex
import equinox as eqx, optax

T = collections.defaultdict(float); N = collections.Counter()


def wrap(mod, name, label, by_caller=False):
    f = getattr(mod, name, None)
    if f is None:
        return

    @functools.wraps(f)
    def g(*a, **k):
        lab = label
        if by_caller:
            fr = sys._getframe(1)
            while fr is not None and os.path.basename(fr.f_code.co_filename) in ("__init__.py", "phases.py", "llvm_import.py"):
                fr = fr.f_back
            lab = f"{label} <- {os.path.basename(fr.f_code.co_filename)}:{fr.f_code.co_name}"
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[lab] += time.perf_counter() - t; N[lab] += 1
    setattr(mod, name, g)


K = importlib.import_module("adoffload.kernels.kernel"); B = importlib.import_module("adoffload.kernels.batching")
codegen = importlib.import_module("adoffload.codegen"); ir = importlib.import_module("adoffload.ir")
from adoffload.jax import handler as H, targets as TG
from adoffload.codegen.host import program as HP, serial as SE
from adoffload.codegen import abi as AB
from adoffload.ir import llvm_import as LI, llvm_export as LE
import adoffload.enzyme.kernels as EK
import jax._src.compiler as JC
wrap(K.DerivedKernel, "_derive", "AD _derive (incl. its import, canonicalize)")
wrap(EK, "derive_kernel", "AD derive_kernel (the AD itself)")
wrap(EK, "jvp_signature", "lazy jvp_signature")
wrap(B, "batched_kernel", "vmap batched_kernel")
wrap(codegen, "compile_for_target", "compile_for_target")
wrap(AB, "add_host_entry", "  abi.add_host_entry")
wrap(SE, "plain_atomics", "  serial.plain_atomics")
wrap(HP.HostProgram, "__init__", "  HostProgram (O3 + MCJIT)")
wrap(H.CompiledHandler, "__init__", "handler build")
wrap(TG, "ensure_target", "ensure_target")
wrap(JC, "backend_compile_and_load", "XLA backend compile")
wrap(ir, "canonicalize", "ir.canonicalize", True)
wrap(LI._Importer, "run", "ir import (_Importer.run)", True)
wrap(LI, "parse_llvm", "ir import: parse_llvm", True)
wrap(ir, "export_module", "ir.export_module", True)
data = ex.make_data(64, 24, 0)


def first(use):
    model = ex.make_model(ex.START, use)
    opt = optax.adam(0.02)
    state = opt.init(eqx.filter(model, eqx.is_array))

    @eqx.filter_jit
    def step(model, state):
        value, grads = eqx.filter_value_and_grad(ex.loss)(model, *data)
        updates, state = opt.update(grads, state, model)
        return eqx.apply_updates(model, updates), state, value
    t = time.perf_counter(); jax.block_until_ready(step(model, state)); return time.perf_counter() - t


for c in os.environ.get("ORDER", "pk"):
    T.clear(); N.clear()
    print("kernel" if c == "k" else "plain", "first step", round(first(c == "k"), 3), "s")
    for k, v in sorted(T.items(), key=lambda kv: -kv[1]):
        print(f"   {k:70s} {v:7.3f} s  x{N[k]}")
