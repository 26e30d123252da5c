"""Kernel calls under shard_map and with sharded inputs, on 4 host devices (in a subprocess)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent('''
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    sys.path.insert(0, sys.argv[1])
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import adoffload as ado
    from kernels import wave, wave_ref
    assert len(jax.devices()) == 4
    mesh = Mesh(np.array(jax.devices()), ("d",))
    f = ado.jax_kernel(wave)
    x = np.linspace(0.1, 2.0, 16); y = np.cos(x)
    g = jax.shard_map(lambda x, y: f(0.3, x, y), mesh=mesh, in_specs=(P("d"), P("d")),
                      out_specs=(P("d"), P("d")))
    np.testing.assert_allclose(jax.jit(g)(x, y)[0], wave_ref(0.3, x, y)[0], rtol=1e-13)
    xs = jax.device_put(x, NamedSharding(mesh, P("d"))); ys = jax.device_put(y, NamedSharding(mesh, P("d")))
    out = jax.jit(f)(0.3, xs, ys)
    np.testing.assert_allclose(out[1], wave_ref(0.3, x, y)[1], rtol=1e-13)
    loss = lambda x, y: jnp.sum(g(x, y)[0] ** 2)
    ref = jax.grad(lambda x, y: jnp.sum(wave_ref(0.3, x, y)[0] ** 2), argnums=(0, 1))(x, y)
    got = jax.jit(jax.grad(loss, argnums=(0, 1)))(xs, ys)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    print("SHARD_MAP_OK")
''')


def test_shard_map_and_sharded_inputs_on_four_host_devices(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env["JAX_PLATFORMS"] = "cpu"        # four host devices, also on a machine with GPUs
    result = subprocess.run([sys.executable, str(script), str(Path(__file__).parent)], capture_output=True,
                            text=True, timeout=300, env=env)
    assert "SHARD_MAP_OK" in result.stdout, result.stdout[-2000:] + result.stderr[-4000:]


def test_grad_of_a_replicated_scalar_inside_shard_map(tmp_path):
    # A parameter replicated over the mesh gets per-device adjoint contributions; its
    # cotangent must be their sum (the benchmarks' shard_map suite, run on 2 GPUs as well).
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "benchmarks", "shard_map", "--device", "cpu", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=300, cwd=root)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads((tmp_path / "results.json").read_text())["suites"]["shard_map"]["rows"]
    assert [(r["devices"], r["agree"]) for r in rows] == [(2, True), (2, True)], rows
