"""cProfile of the research example's first training step (kernel model), fresh process.

ORDER=kp (default, the example's order: kernel model first) or pk (plain JAX first: JAX's warm-up
outside the kernel step). Prints the first-step seconds of each and the top of the kernel step's
profile (cumulative and total time). Run from the repository root with an empty ADOFFLOAD_CACHE_DIR.
"""
import cProfile, os, pstats, sys, time
sys.path.insert(0, "examples/research")
import jax
jax.config.update("jax_enable_x64", True)
import learned_pair_potential as ex
import equinox as eqx, optax

data = ex.make_data(64, 24, 0)


def first(use, prof=None):
    model = ex.make_model(ex.START, use)
    opt = optax.adam(0.02)
    state = opt.init(eqx.filter(model, eqx.is_array))

    @eqx.filter_jit
    def step(model, state):
        value, grads = eqx.filter_value_and_grad(ex.loss)(model, *data)
        updates, state = opt.update(grads, state, model)
        return eqx.apply_updates(model, updates), state, value
    t = time.perf_counter()
    if prof: prof.enable()
    jax.block_until_ready(step(model, state))
    if prof: prof.disable()
    return time.perf_counter() - t


prof = cProfile.Profile()
for c in os.environ.get("ORDER", "kp"):
    print("kernel" if c == "k" else "plain", round(first(c == "k", prof if c == "k" else None), 3))
s = pstats.Stats(prof)
N = int(os.environ.get("TOP", "45"))
s.sort_stats("cumulative").print_stats(N)
s.sort_stats("tottime").print_stats(N)
if os.environ.get("CALLERS"):
    for f in os.environ["CALLERS"].split(","):
        s.print_callers(f)
