"""The jitted training step's optimized HLO: its custom calls (target, operand shapes) in order."""
import os, sys, re
sys.path.insert(0, "examples/research"); sys.path.insert(0, "examples/chemistry")
import jax
jax.config.update("jax_enable_x64", True)
import learned_pair_potential as ex
import equinox as eqx, optax
C, A = int(os.environ.get("C", 64)), int(os.environ.get("A", 24))
data = ex.make_data(C, A, 0)
model = ex.make_model(ex.START, True)
opt = optax.adam(0.02)
state = opt.init(eqx.filter(model, eqx.is_array))
def step(model, state):
    value, grads = eqx.filter_value_and_grad(ex.loss)(model, *data)
    updates, state = opt.update(grads, state, model)
    return eqx.apply_updates(model, updates), state, value
dyn, st = eqx.partition((model, state), eqx.is_array)
text = jax.jit(lambda d: step(*eqx.combine(d, st))).lower(dyn).compile().as_text()
for line in text.splitlines():
    if "custom-call" in line or "custom_call_target" in line:
        print(re.sub(r"metadata=\{.*?\}", "", line.strip())[:400])
