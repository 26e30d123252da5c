"""A user's-eye hunt on block kernels (issue #13), on the host CPU: kernels shaped the way an
outside user writes them (row softmax and layernorm with block reductions, a padded shared
transpose, a double-buffered Hillis-Steele scan, a halving reduction tree, a tiled conv1d with a
halo, a matmul with a non-square block, warp_max mixed with shuffle_down, reads of shared memory at
a loaded index, barriers in nested loops, a 3-D block) checked against numpy, then their
derivatives against both oracles: central differences (forward mode) and <J v, w> = <v, J^T w>
between forward and reverse mode. The refusals found by the hunt are at the end."""
import importlib.util

import numpy as np
import pytest

import adoffload as ado
from adoffload.errors import UnsupportedConstructError


def _compile(source: str, tmp_path, name="k"):
    path = tmp_path / f"{name}_{abs(hash(source))}.py"
    path.write_text("import adoffload as ado\n" + source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- refusals

# Cooperative calls the front end's uniformity check did not see (frontend/blocks.py): each ran on
# only some threads of a warp, and the host's exchange returned NaN (silently wrong values).
HIDDEN_DIVERGENT = {
    # ``a < b < c`` stops at the first false comparison (like Python): c runs on some threads only.
    # Was accepted; with x = +-1 every y stayed 0 (the divergent warp_sum gave NaN).
    "later operand of a chained comparison": """
@ado.kernel(block=32)
def k(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    if 0.0 < x[i] < ado.warp_sum(x[i]):
        y[i] = 1.0
""",
    # the indices of an assignment's target are evaluated too: was accepted (a NaN index then)
    "index of an assignment target": """
@ado.kernel(block=32)
def k(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0:
        y[ado.i64(ado.warp_sum(x[i])) + 32] = 1.0
""",
    "index of an augmented assignment target": """
@ado.kernel(block=32)
def k(x: ado.In[ado.f64], y: ado.InOut[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0:
        y[ado.i64(ado.block_max(x[i]))] += 1.0
""",
}


@pytest.mark.parametrize("case", sorted(HIDDEN_DIVERGENT))
def test_cooperative_call_hidden_in_divergent_code_is_refused(case, tmp_path):
    with pytest.raises(UnsupportedConstructError, match=r"not uniform across the block") as info:
        _compile(HIDDEN_DIVERGENT[case], tmp_path)
    assert "ado.warp_sum" in info.value.source_line or "ado.block_max" in info.value.source_line


def test_uniform_chained_comparison_and_target_index_are_accepted(tmp_path):
    """The fix refuses only what is divergent: a chain whose earlier operands are block-uniform,
    and a target index computed from a block reduction outside any divergent branch."""
    module = _compile("""
@ado.kernel(block=32)
def k(x: ado.In[ado.f64], y: ado.InOut[ado.f64], n: ado.f64):
    i = ado.tid()
    if 0.0 < n < ado.block_sum(x[i]):
        y[i] = 1.0
    y[i + 0 * ado.i64(ado.block_max(x[i]))] += 2.0
""", tmp_path)
    x = np.ones(64)
    y = np.zeros(64)
    module.k(x, y, 0.5, grid=64)
    np.testing.assert_array_equal(y, 3.0)
    y = np.zeros(64)
    module.k(x, y, 40.0, grid=64)
    np.testing.assert_array_equal(y, 2.0)
