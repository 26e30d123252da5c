import time, sys
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
from adoffload.chemistry import available
compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda e, d, **k: compiles.append(d) if e.endswith("backend_compile_duration") else None)
t = time.perf_counter()
ok, why = available("adoffload", device="cpu")
print(f"available('adoffload'): {ok} in {time.perf_counter() - t:.2f} s, {len(compiles)} XLA compiles "
      f"({sum(compiles):.2f} s); cpu {time.process_time():.2f} s")
