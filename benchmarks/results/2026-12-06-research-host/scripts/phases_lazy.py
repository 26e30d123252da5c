import os, sys, time, collections, functools
sys.path.insert(0, "examples/research")
import jax
jax.config.update("jax_enable_x64", True)
import learned_pair_potential as ex
import equinox as eqx, optax
T = collections.defaultdict(float); N = collections.Counter()
depth = [0]
def wrap(mod, name, label):
    f = getattr(mod, name)
    @functools.wraps(f)
    def g(*a, **k):
        t = time.perf_counter()
        try: return f(*a, **k)
        finally:
            T[label] += time.perf_counter() - t; N[label] += 1
    setattr(mod, name, g)
import importlib; K = importlib.import_module("adoffload.kernels.kernel"); B = importlib.import_module("adoffload.kernels.batching")
codegen = importlib.import_module("adoffload.codegen"); ir = importlib.import_module("adoffload.ir")
from adoffload.jax import handler as H, cpu_parallel as CP, targets as TG, primitive as P
from adoffload.codegen.host import program as HP
from adoffload.codegen.gpu import reductions as R
from adoffload.ir import llvm_import as LI
import jax._src.compiler as JC
wrap(K.DerivedKernel, "_derive", "AD derive")
wrap(K.DerivedKernel, "__init__", "DerivedKernel() (all AD, incl. lazy signatures)")
EK = importlib.import_module("adoffload.enzyme.kernels")
if hasattr(EK, "jvp_signature"): wrap(EK, "jvp_signature", "jvp_signature (lazy, no AD)")
wrap(B, "batched_kernel", "vmap batched_kernel")
wrap(codegen, "compile_for_target", "compile_for_target")
wrap(HP.HostProgram, "__init__", "HostProgram (MCJIT incl. handler)")
wrap(H.CompiledHandler, "__init__", "handler build")
wrap(CP, "min_chunk_threads", "min_chunk_threads")
wrap(TG, "ensure_target", "ensure_target")
wrap(R, "_analyze", "reductions._analyze")
wrap(JC, "backend_compile_and_load", "XLA backend compile")
wrap(ir, "canonicalize", "ir.canonicalize")
import adoffload.kernels.launch as L
wrap(L, "facts_proven_by", "facts_proven_by")
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
    print("kernel" if c == "k" else "plain", round(first(c == "k"), 3))
    for k, v in sorted(T.items(), key=lambda kv: -kv[1]): print(f"   {k:40s} {v:7.3f} s  x{N[k]}")
