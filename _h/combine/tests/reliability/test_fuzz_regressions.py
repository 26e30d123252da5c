"""Bugs the differential fuzzer found, each reduced to a small kernel (adoffload.testing.fuzz)."""
import numpy as np

import adoffload as ado


@ado.kernel
def overwrite_in_loop(a: ado.f64, x: ado.In[ado.f64], w: ado.In[ado.f64], z: ado.InOut[ado.f64],
                      out: ado.Out[ado.f64]):
    i = ado.tid()
    f0 = x[i]
    c = 0
    while c < 2:
        c += 1
        f0 = ado.sin(z[i])
        z[i] = w[i]
    out[i] = f0


def test_reverse_with_dynamic_tape_when_the_grid_proves_the_bounds():
    """Fuzz seed 2000043: the variant without bounds checks needed no dynamic tape, but the
    launcher sized one from the checked variant's protocol -> 'tape_count.body is not in the
    module'. Variants that would change the tape protocol now keep their checks."""
    rev = ado.vjp(overwrite_in_loop, ["a", "x", "w", "z"])
    w, z = np.array([0.7, 0.9]), np.array([0.3, 0.5])
    for grid in (1, 2):                 # grid 2 proves every bounds fact, grid 1 none
        d_w = np.zeros(2)
        rev(1.0, w, w, z.copy(), np.zeros(2), d_a=np.zeros(1), d_x=np.zeros(2), d_w=d_w,
            d_z=np.zeros(2), d_out=np.ones(2), grid=grid)
        # out = sin(z) after the second iteration, where z = w: d out / d w = cos(w)
        np.testing.assert_allclose(d_w[:grid], np.cos(w[:grid]), rtol=1e-12)
        assert (d_w[grid:] == 0).all()


@ado.kernel
def local_array_direct_store(a: ado.f64, idx: ado.In[ado.i64], out: ado.Out[ado.f64]):
    i = ado.tid()
    t = ado.zeros(4, ado.f64)
    t[0] = a                          # element 0: a store straight into the alloca, no GEP
    t[1] = a
    t[2] = a
    out[i] = ado.sin(t[idx[i] % 3]) + t[0]


def test_store_into_a_local_array_without_an_index_exports():
    """Fuzz seed 2000018: exporting 'store double, alloca [4 x double]' failed in llvmlite
    ("cannot store double to [4 x double]*"), so reverse mode through local arrays broke."""
    idx = np.array([1, 2, 0])
    out = np.zeros(3)
    local_array_direct_store(0.5, idx, out, grid=3)
    np.testing.assert_allclose(out, np.sin(0.5) + 0.5)
    d_a = np.zeros(1)
    ado.vjp(local_array_direct_store, ["a"])(0.5, idx, np.zeros(3), d_a=d_a, d_out=np.ones(3), grid=3)
    np.testing.assert_allclose(d_a, [3 * (np.cos(0.5) + 1)], rtol=1e-12)
