import sys, time; sys.path.insert(0, "examples/research")
import jax; jax.config.update("jax_enable_x64", True)
import learned_pair_potential as ex, equinox as eqx
from adoffload.jax import targets as TG
from adoffload.codegen.host.program import HostProgram
data = ex.make_data(4, 6, 0)
m = ex.make_model(ex.START, True)
jax.block_until_ready(eqx.filter_jit(eqx.filter_value_and_grad(ex.loss))(m, *data))
texts = [t.handler.text for t in TG._TARGETS.values()]
print([len(t) for t in texts])
for o, c in ((3, 3), (1, 1), (2, 1), (0, 0), (3, 3), (1, 1), (0,1)):
    b = time.perf_counter()
    for t in texts: HostProgram(t, opt_level=o, codegen_level=c)
    print(o, c, round((time.perf_counter() - b) / len(texts) * 1e3, 1), "ms per handler")
