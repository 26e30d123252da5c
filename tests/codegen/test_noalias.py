"""noalias on GPU pointer params: read-only arrays load through the non-coherent path."""
import re

import numpy as np
import pytest

import adoffload as ado
from adoffload.codegen.gpu import tools
from adoffload.errors import ToolNotFoundError


def _have(finder):
    try:
        finder()
        return True
    except ToolNotFoundError:
        return False


needs_libdevice = pytest.mark.skipif(not _have(tools.find_libdevice), reason="libdevice not installed")


@ado.kernel
def triad(a: ado.Out[ado.f64], b: ado.In[ado.f64], c: ado.In[ado.f64], alpha: ado.f64):
    i = ado.tid()
    a[i] = b[i] + alpha * c[i]


def _facts():
    return frozenset(triad.candidate_facts)


@needs_libdevice
def test_noalias_option_reaches_codegen_and_gives_ld_global_nc():
    plain = triad.compiled("nvptx", arch="sm_90", proven=_facts()).ptx
    fast = triad.compiled("nvptx", arch="sm_90", proven=_facts(), noalias=True).ptx
    assert "ld.global.nc" not in plain
    assert len(re.findall(r"ld\.global\.nc\.(b|f)64", fast)) == 2       # b and c; a is stored
    assert "st.global" in fast and "st.global.nc" not in fast


def test_options_are_part_of_the_variant_key_and_host_results_unchanged():
    n = 100
    b, c = np.arange(n, dtype=np.float64), np.ones(n)
    a = np.zeros(n)
    triad(a, b, c, 2.0, grid=n)
    np.testing.assert_array_equal(a, b + 2.0)
    one = triad.compiled("host", reductions="off")
    other = triad.compiled("host")
    assert one is not other and one is triad.compiled("host", reductions="off")
