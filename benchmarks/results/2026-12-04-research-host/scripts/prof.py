import os, sys, time, statistics
sys.path.insert(0, "examples/research")
import jax
jax.config.update("jax_enable_x64", True)
import learned_pair_potential as ex
import equinox as eqx, optax, jax.numpy as jnp
configs, atoms = int(os.environ.get("C", 64)), int(os.environ.get("A", 24))
data = ex.make_data(configs, atoms, 0)
def mk(use):
    model = ex.make_model(ex.START, use)
    opt = optax.adam(0.02)
    state = opt.init(eqx.filter(model, eqx.is_array))
    @eqx.filter_jit
    def step(model, state):
        value, grads = eqx.filter_value_and_grad(ex.loss)(model, *data)
        updates, state = opt.update(grads, state, model)
        return eqx.apply_updates(model, updates), state, value
    return model, state, step
res = {}
for use in (True, False):
    model, state, step = mk(use)
    t = time.perf_counter()
    lowered = step.lower(model, state) if hasattr(step, "lower") else None
    t1 = time.perf_counter()
    out = step(model, state); jax.block_until_ready(out)
    t2 = time.perf_counter()
    res[use] = (model, state, step)
    print("kernel" if use else "plain", "first call", round(t2 - t, 3), flush=True)
if os.environ.get("HLO"):
    model, state, step = res[True]
    txt = jax.jit(lambda m, s: step(m, s)).lower(model, state).compile().as_text()
    import re
    print("custom calls:", len(re.findall(r"custom-call\(", txt)))
    for m in re.findall(r'custom_call_target="([^"]+)"', txt): print("  ", m)
for rep in range(int(os.environ.get("R", 3))):
    for use in (True, False):
        model, state, step = res[use]
        ts = []
        for k in range(200):
            b = time.perf_counter(); out = step(model, state); jax.block_until_ready(out); ts.append(time.perf_counter() - b)
        print("kernel" if use else "plain ", "step ms median", round(statistics.median(ts) * 1e3, 3), "min", round(min(ts)*1e3, 3), flush=True)
print(os.getloadavg())
