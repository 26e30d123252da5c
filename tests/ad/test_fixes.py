"""Focused regression tests for engine bugs the kernel table found (one per fix)."""
import numpy as np

import adoffload as ado
from adoffload import In, InOut, Out, f64

from .check_grads import check_grads, run_jvp


@ado.kernel
def _energy(x: In[f64], e: InOut[f64]):
    i = ado.tid()
    ado.atomic_add(e, 0, x[i] * x[i])


def test_vector_mode_through_atomic_add_only_output():
    """forward.pointer_element_type looked at loads/stores/GEPs only: an array touched only by
    atomicrmw had no element type and vector mode refused it."""
    x = np.array([0.5, -1.0, 2.0])
    tangents = np.array([[1.0, 0, 0], [0, 1.0, 0], [1.0, 1.0, 1.0], [0, 0, 0]])
    _, shadows = run_jvp(_energy, dict(x=x, e=np.zeros(1)), {"x": tangents}, ["x"], 3, width=4)
    np.testing.assert_allclose(shadows["d_e"][:, 0], tangents @ (2 * x))
