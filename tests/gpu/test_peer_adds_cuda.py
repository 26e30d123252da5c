"""Warp-aggregated gathered adds (codegen/gpu/peer_adds.py, on by default) on a real GPU:
scattered adds to a few, to many and to one address give ``np.add.at``'s sums, and the research
model's parameter-table adjoint gives the host's gradient, with ``match.any`` really in the PTX."""
from __future__ import annotations

import numpy as np
import pytest

import adoffload as ado
from tests.codegen.test_peer_adds import pair_table, scatter

pytestmark = pytest.mark.gpu


@pytest.fixture
def peer_adds(monkeypatch):
    monkeypatch.delenv("ADOFFLOAD_PEER_ADDS", raising=False)      # the default: on


@pytest.mark.parametrize("spread", [1, 3, 97, 100_000])
def test_scattered_adds_match_add_at(cuda, peer_adds, spread):
    n = 200_003
    rng = np.random.default_rng(spread)
    idx = rng.integers(0, spread, n) * 2
    v = rng.uniform(-1.0, 2.0, n)
    h = np.zeros(2 * spread + 2)
    scatter(h, idx, v, grid=n, device="cuda")
    taking = v > -0.5
    expected = np.zeros_like(h)
    np.add.at(expected, idx[taking], v[taking])
    np.add.at(expected, idx[taking] + 1, 2.0 * v[taking])
    np.testing.assert_allclose(h, expected, rtol=1e-11, atol=1e-9)


def test_parameter_table_adjoint_matches_the_host(cuda, peer_adds):
    k = ado.vjp(pair_table, ["params"], primal_outputs=False)
    assert "match.any.sync.b64" in k.compiled("nvptx", noalias=True).artifact
    rng = np.random.default_rng(3)
    n = 1000
    pos = rng.uniform(0.0, 12.0, (n, 3))
    kind = rng.integers(0, 2, n)
    params = np.array([[1.0, 1.6, 1.1], [0.7, 1.9, 1.25], [1.3, 1.4, 1.0]])
    seed = rng.standard_normal(n)
    grads = []
    for device in ("cuda", "cpu"):
        d_params = np.zeros((3, 3))
        k(pos, kind, params, np.zeros(n), d_params=d_params, d_e=seed.copy(), grid=n, device=device)
        grads.append(d_params)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-11, atol=1e-11 * np.abs(grads[1]).max())
