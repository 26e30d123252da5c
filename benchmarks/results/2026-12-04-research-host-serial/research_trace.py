import os, sys, glob, gzip, json, collections, time
sys.path.insert(0, "examples/research")
sys.path.insert(0, "examples/chemistry")
import jax
jax.config.update("jax_enable_x64", True)
import learned_pair_potential as ex
import equinox as eqx, optax
C, A = int(os.environ.get("C", 512)), int(os.environ.get("A", 64))
data = ex.make_data(C, A, 0)
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
    return model, state, step
for use in (True, False):
    m, s, step = mk(use)
    for _ in range(3): jax.block_until_ready(step(m, s))
    t0 = time.perf_counter()
    for _ in range(20): jax.block_until_ready(step(m, s))
    print("use_kernel", use, "step ms", (time.perf_counter()-t0)/20*1e3)
    d = f"/tmp/rs_trace_{use}"
    os.system(f"rm -rf {d}")
    with jax.profiler.trace(d):
        for _ in range(20): jax.block_until_ready(step(m, s))
    f = glob.glob(f"{d}/**/*.trace.json.gz", recursive=True)[0]
    ev = json.load(gzip.open(f))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    pids = {e["pid"]: e["args"].get("name") for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
    tot = collections.defaultdict(float); cnt = collections.Counter()
    for e in ev:
        if e.get("ph") == "X":
            k = (str(pids.get(e["pid"]))[:30], e["name"][:90]); tot[k] += e["dur"]; cnt[k] += 1
    print("== use_kernel", use, "top events (ms/step, count/step):")
    for k, v in sorted(tot.items(), key=lambda kv: -kv[1])[:28]:
        print(f"  {v/20/1000:9.3f} {cnt[k]/20:6.1f}  {k[0]} | {k[1]}")
