import time, statistics, sys
import numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import adoffload as ado
@ado.kernel
def scale(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = 2.0 * x[i]
f = jax.jit(ado.jax_kernel(scale))
x = jnp.ones(8)
f(x).block_until_ready()
ts = []
for r in range(5):
    b = time.perf_counter()
    for _ in range(5000): y = f(x)
    y.block_until_ready(); ts.append((time.perf_counter() - b) / 5000 * 1e6)
g = jax.jit(lambda x: 2.0 * x); g(x).block_until_ready()
tg = []
for r in range(5):
    b = time.perf_counter()
    for _ in range(5000): y = g(x)
    y.block_until_ready(); tg.append((time.perf_counter() - b) / 5000 * 1e6)
print("us per call: kernel", round(min(ts), 2), "plain", round(min(tg), 2))
