"""Every row of the kernel table through check_grads (public API: ado.jvp / ado.vjp)."""
import pytest

from .check_grads import check_spec
from .kernels import SPECS


def test_table_is_large_and_names_are_unique():
    names = [s.name for s in SPECS]
    assert len(names) >= 60
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_kernel_gradients(spec):
    check_spec(spec)
