"""examples/research: the Equinox model with the adoffload kernel as its energy layer trains on energies and
forces; its training gradient (second order through the custom call: forces are -d E / d x inside the loss)
is plain JAX's on the same model, and the loss falls (small sizes)."""
import os
import sys

import numpy as np
import pytest

FOLDER = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "research"))


@pytest.fixture
def research_path():
    pytest.importorskip("equinox")
    pytest.importorskip("optax")
    sys.path.insert(0, FOLDER)
    yield
    sys.path.remove(FOLDER)


def test_second_order_gradient_matches_plain_jax_and_the_loss_falls(research_path, tmp_path, capsys):
    import learned_pair_potential as example
    result = example.main(["--configs", "6", "--atoms", "10", "--steps", "40", "--lr", "0.05", "--out", str(tmp_path)])
    assert result["grad_difference"] < 1e-8
    losses = np.asarray(result["losses"])
    assert losses[-1] < 0.05 * losses[0]
    np.testing.assert_allclose(losses, result["reference_losses"], rtol=1e-8)     # the same training, step by step
    assert (tmp_path / "loss.png").exists()
    out = capsys.readouterr().out
    assert "plain JAX step / kernel step" in out and "second-order gradient" in out


def test_gradient_of_the_force_loss_agrees_with_central_differences(research_path):
    """The second oracle: d loss / d log_params of the kernel model against central differences."""
    import equinox as eqx
    import jax
    import learned_pair_potential as example
    jax.config.update("jax_enable_x64", True)
    data = example.make_data(3, 8, seed=2)
    model = example.make_model(example.START, True)
    got = np.asarray(example.gradient(model, data))
    value = jax.jit(lambda logs: example.loss(eqx.tree_at(lambda m: m.log_params, model, logs), *data))
    logs, h = np.asarray(model.log_params), 1e-5
    expected = np.zeros_like(logs)
    for index in np.ndindex(logs.shape):
        step = np.zeros_like(logs)
        step[index] = h
        expected[index] = (float(value(logs + step)) - float(value(logs - step))) / (2 * h)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-8 * np.abs(expected).max())


@pytest.mark.gpu
def test_on_cuda_the_second_order_gradient_matches_plain_jax(research_path, cuda, tmp_path):
    import jax
    if jax.devices()[0].platform != "gpu":
        pytest.skip("JAX sees no GPU here (jax[cuda] not installed)")
    import learned_pair_potential as example
    result = example.main(["--device", "cuda", "--configs", "64", "--atoms", "32", "--steps", "20",
                           "--out", str(tmp_path)])
    assert result["grad_difference"] < 1e-8
    np.testing.assert_allclose(result["losses"], result["reference_losses"], rtol=1e-6)
    assert result["losses"][-1] < result["losses"][0]
