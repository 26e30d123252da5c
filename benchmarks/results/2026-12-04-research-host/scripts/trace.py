import os, sys, time, glob, gzip, json, collections
sys.path.insert(0, "examples/research")  # run from the repository root (or an export of another commit)
import jax
jax.config.update("jax_enable_x64", True)
import learned_pair_potential as ex
import equinox as eqx, optax
data = ex.make_data(int(os.environ.get("C", 64)), int(os.environ.get("A", 24)), 0)
def mk(use):
    model = ex.make_model(ex.START, use)
    opt = optax.adam(0.02)
    state = opt.init(eqx.filter(model, eqx.is_array))
    @eqx.filter_jit
    def step(model, state):
        value, grads = eqx.filter_value_and_grad(ex.loss)(model, *data)
        updates, state = opt.update(grads, state, model)
        return eqx.apply_updates(model, updates), state, value
    jax.block_until_ready(step(model, state))
    import re
    hlo = step.lower(model, state).lowered.compile().as_text()
    global NAMES
    NAMES = dict(re.findall(r"%(adoffload_kernel_call[.\d]*) = .*?custom_call_target=\"adoffload_([a-z_]+?_\d+)\"", hlo))
    return model, state, step
for use in (True, False):
    m, s, step = mk(use)
    d = f"/tmp/rs_trace_{use}"
    os.system(f"rm -rf {d}")
    with jax.profiler.trace(d, create_perfetto_trace=True):
        for _ in range(50): jax.block_until_ready(step(m, s))
    f = glob.glob(f"{d}/**/*.trace.json.gz", recursive=True)[0]
    ev = json.load(gzip.open(f))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    tot = collections.defaultdict(float); cnt = collections.Counter()
    for e in ev:
        if e.get("ph") == "X":
            tot[e["name"]] += e["dur"]; cnt[e["name"]] += 1
    calls = {NAMES.get(k, k): v/50/1000 for k, v in tot.items() if k.startswith("adoffload")}
    print("kernel" if use else "plain", "custom calls ms/step:", " ".join(f"{k} {v:.3f}" for k, v in sorted(calls.items())), "sum", round(sum(calls.values()), 3),
          "| execute", round(tot["ThunkExecutor::Execute"]/50/1000, 3), "| step", round(tot["PjitFunction(step)"]/50/1000, 3))
