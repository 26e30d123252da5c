"""Random block kernels against both AD oracles (adoffload/testing/block_fuzz.py), and the bugs it found.

A fixed seed list, cheap for CI. Longer runs: ``python -m adoffload.testing.block_fuzz --count 200 --seed 1``.
"""
import importlib.util
import random

import numpy as np
import pytest

from adoffload.testing import block_fuzz
from adoffload.testing.block_generator import GeneratedBlockKernel, generate

# Seeds whose kernels cover 1-D and 2-D blocks, tile loops, exchanges and atomics (outcome: pass).
SEEDS = [3000010, 3000014, 3000021]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _check(source: str, block, folder, seed: int = 1, jax: bool = False) -> block_fuzz.CaseResult:
    return block_fuzz.check_case(GeneratedBlockKernel(source, tuple(block)), seed, folder, jax=jax)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_block_kernels_pass_both_oracles(seed, folder):
    kernel = generate(random.Random(seed))
    result = block_fuzz.check_case(kernel, seed, folder)
    assert result.outcome == "pass", "\n".join([kernel.source, result.outcome] + result.details)


def test_generator_is_deterministic_and_varied():
    sources = [generate(random.Random(s)).source for s in range(40)]
    assert sources[:5] == [generate(random.Random(s)).source for s in range(5)]
    text = "\n".join(sources)
    for construct in ("ado.sync_threads()", "ado.shuffle(", "ado.shuffle_down(", "ado.warp_sum(", "ado.warp_max(",
                      "ado.block_sum(", "ado.block_max(", "ado.atomic_add(", "block=(16, 16)", "block=32"):
        assert construct in text, construct


# --- bugs the fuzzer found ------------------------------------------------------------------

# The reverse sweep recomputed block_sum's result where the adjoint of its use needed it: under
# the thread-dependent branch, so only the odd threads reached that block_sum (the host stopped
# the block: "reached different barriers"; a GPU would hang). Exchanges are now taped.
EXCHANGE_UNDER_DIVERGENT_REVERSE = """
@ado.kernel(block=32)
def block_fuzzed(a: ado.f64, x: ado.In[ado.f64], w: ado.In[ado.f64], z: ado.InOut[ado.f64],
                 out: ado.Out[ado.f64], acc: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    f0 = x[i]
    for r1 in range(2):
        f2 = ado.block_sum(z[i])
        if t % 2 == 1:
            f2 = ado.sin(f0) * f2
        f0 = f2
    out[i] = f0
"""


def test_exchange_needed_by_a_divergent_adjoint_is_taped_not_recomputed(folder):
    """Both numpy oracles, and the JAX one where jax is installed."""
    jax = importlib.util.find_spec("jax") is not None
    result = _check(EXCHANGE_UNDER_DIVERGENT_REVERSE, (32,), folder, jax=jax)
    assert result.outcome == "pass" and ("jax checked" in result.notes) == jax, result.details


# deterministic=True: the contribution log's base pointer was stored after the entry block's
# terminator when an unused tape slot had been removed from that block first (LLVM refused the
# module: "expected instruction opcode"). The fuzzer's kernel, reduced by deleting lines.
LOG_BASE_AFTER_TERMINATOR = """
@ado.kernel(block=(4, 32))
def block_fuzzed(a: ado.f64, x: ado.In[ado.f64, 2], w: ado.In[ado.f64, 2], z: ado.InOut[ado.f64, 2],
                 out: ado.Out[ado.f64, 2], acc: ado.Out[ado.f64]):
    i0, i1 = ado.tid()
    ti, tj = ado.thread_id()
    b0, b1 = ado.block_id()
    n0 = x.shape[0]
    n1 = x.shape[1]
    t = ti * 32 + tj
    lane = ado.lane_id()
    S0 = ado.shared((4, 32), ado.f64)
    S1 = ado.shared((4, 32), ado.f64)
    f0 = x[i0, i1]
    S1[ti, (tj + 1) % 32] = ado.atan(a)
    ado.sync_threads()
    f1 = (ado.cos(f0)) * (0.125 * float(lane))
    for j2 in range(2):
        f1 = 0.5 * f1 + 0.5 * ado.tanh(ado.exp2(ado.sin(w[(j2) % n0, (ti) % n1])))
    f5 = (ado.cos(x[((t) // 2) % n0, ((0) + (lane)) % n1])) + (ado.sinh(ado.tanh(w[i0, i1])))
    if t < 76:
        S1[ti, tj] = 0.5 * S1[ti, tj] + ((w[i0, i1]) if t % 2 == 1 else (0.125 * float(b1)))
    f6 = ado.block_max(ado.pow(1.5 + ado.sin(w[i0, i1]), ado.tanh(w[i0, i1])))
    for j7 in range(2):
        f0 = 0.5 * f0 + 0.5 * ado.tanh(x[i0, i1])
    f1 = S1[((lane + 106) % 128) // 32, ((lane + 106) % 128) % 32]
    out[i0, i1] = 0.125 * float(t) + 0.1 * (f0 + f1 + f5 + f6)
"""


def test_deterministic_log_base_stays_in_the_entry_block(folder):
    result = _check(LOG_BASE_AFTER_TERMINATOR, (4, 32), folder)
    assert result.outcome == "pass" and not result.notes, result.details


# deterministic=True refuses one load whose address may be a global or a shared array (instcombine
# merges the loads of ``w[i] if t < 7 else S0[31 - t]``); the refusal named no source line.
GLOBAL_OR_SHARED_LOAD = """
@ado.kernel(block=32)
def block_fuzzed(a: ado.f64, x: ado.In[ado.f64], w: ado.In[ado.f64], z: ado.InOut[ado.f64],
                 out: ado.Out[ado.f64], acc: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.thread_id()
    S0 = ado.shared(32, ado.f64)
    S0[t] = x[i] * a
    ado.sync_threads()
    out[i] = ado.sin((w[i]) if t < 7 else (S0[31 - t]))
"""


def test_deterministic_refusal_of_a_mixed_address_names_the_line(folder):
    result = _check(GLOBAL_OR_SHARED_LOAD, (32,), folder)
    assert result.outcome == "pass", result.details          # the default modes are right
    assert result.notes == ["deterministic refused (DifferentiationError)"]
    lines = ("import adoffload as ado\n\n\n" + GLOBAL_OR_SHARED_LOAD).splitlines()   # as load_kernel writes it
    line = 1 + next(k for k, text in enumerate(lines) if "out[i] =" in text)
    assert "mixes several" in result.details[0] and f".py:{line}" in result.details[0], result.details


def test_race_check_drops_a_branch_condition_too_deep_to_follow(tmp_path):
    """races/guards.py tested ``None & set`` (TypeError while making the kernel) when a branch
    condition depended on a chain of more than 24 instructions."""
    body = "\n".join(["    v = x[i]"] + ["    v = ado.sin(v) * 1.5 + 0.25"] * 30)
    path = tmp_path / "deep_guard_kernel.py"
    path.write_text("import adoffload as ado\n\n\n@ado.kernel(block=32)\n"
                    "def deep_guard(x: ado.In[ado.f64], out: ado.Out[ado.f64]):\n"
                    "    i = ado.tid()\n    t = ado.thread_id()\n    S = ado.shared(32, ado.f64)\n"
                    f"{body}\n    if v > 0.5:\n        S[t] = v\n    else:\n        S[t] = 2.0 * v\n"
                    "    ado.sync_threads()\n    out[i] = S[31 - t]\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x, out = np.linspace(-1.0, 1.0, 32), np.zeros(32)
    module.deep_guard(x, out, grid=32)
    v = x.copy()
    for _ in range(30):
        v = np.sin(v) * 1.5 + 0.25
    np.testing.assert_allclose(out, np.where(v > 0.5, v, 2.0 * v)[::-1], rtol=1e-13)


def test_the_harness_reports_a_wrong_gradient(folder, monkeypatch):
    """Not vacuous: a reverse kernel whose gradient is off is a mismatch."""
    real = block_fuzz.run_vjp

    def off(reverse, inputs, cotangent, grid, device="cpu"):
        primal, grads = real(reverse, inputs, cotangent, grid, device)
        return primal, {**grads, "x": grads["x"] + 1e-6 * np.arange(grads["x"].size).reshape(grads["x"].shape)}
    monkeypatch.setattr(block_fuzz, "run_vjp", off)
    result = _check(EXCHANGE_UNDER_DIVERGENT_REVERSE, (32,), folder)
    assert result.outcome == "mismatch" and any(d.startswith("identity") for d in result.details)


def test_command_line_counts_outcomes(capsys):
    assert block_fuzz.main(["--count", "1", "--seed", "18"]) == 0
    text = capsys.readouterr().out
    assert "cases: 1" in text and "failures: 0" in text
