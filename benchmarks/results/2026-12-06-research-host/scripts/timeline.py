"""One training step's timeline from a jax.profiler trace: each op's thread, start and duration (us),
relative to the step's start; then the per-step mean of each custom call over N steps."""
import os, sys, glob, gzip, json, collections, time
sys.path.insert(0, "examples/research"); sys.path.insert(0, "examples/chemistry")
import jax
jax.config.update("jax_enable_x64", True)
import learned_pair_potential as ex
import equinox as eqx, optax
C, A, N = int(os.environ.get("C", 64)), int(os.environ.get("A", 24)), int(os.environ.get("N", 50))
data = ex.make_data(C, A, 0)
model = ex.make_model(ex.START, os.environ.get("USE", "1") == "1")
opt = optax.adam(0.02)
state = opt.init(eqx.filter(model, eqx.is_array))
@eqx.filter_jit
def step(model, state):
    value, grads = eqx.filter_value_and_grad(ex.loss)(model, *data)
    updates, state = opt.update(grads, state, model)
    return eqx.apply_updates(model, updates), state, value
for _ in range(10): jax.block_until_ready(step(model, state))
t = []
for _ in range(N):
    t0 = time.perf_counter(); jax.block_until_ready(step(model, state)); t.append(time.perf_counter() - t0)
t.sort(); print(f"step ms: median {t[N//2]*1e3:.3f} min {t[0]*1e3:.3f}")
d = f"/tmp/rs_tl_{os.getpid()}"
with jax.profiler.trace(d):
    for _ in range(N): jax.block_until_ready(step(model, state))
f = glob.glob(f"{d}/**/*.trace.json.gz", recursive=True)[0]
ev = json.load(gzip.open(f)); ev = ev["traceEvents"] if isinstance(ev, dict) else ev
xs = sorted((e for e in ev if e.get("ph") == "X"), key=lambda e: e["ts"])
steps = [e for e in xs if e["name"].startswith("PjitFunction(step)")]
s0 = steps[len(steps) // 2]
if os.environ.get("SHOW"): print("one step (tid, start us, dur us, name):")
for e in xs:
    if os.environ.get("SHOW") and s0["ts"] <= e["ts"] <= s0["ts"] + s0["dur"] * 3 and not e["name"].startswith("$"):
        print(f"  {e['tid']:>8} {e['ts'] - s0['ts']:8.1f} {e['dur']:8.1f}  {e['name'][:60]}")
tot = collections.defaultdict(float)
for e in xs:
    if "kernel_call" in e["name"] or "fusion" in e["name"] or e["name"].startswith("wrapped"):
        tot[e["name"]] += e["dur"]
print("per step us:", {k: round(v / N, 1) for k, v in sorted(tot.items(), key=lambda kv: -kv[1])[:12]})
