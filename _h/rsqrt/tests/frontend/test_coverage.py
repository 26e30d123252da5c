"""Which Out arrays a kernel writes in full (so launches and JAX calls skip zeroing them)."""
import numpy as np

import adoffload as ado
from adoffload.frontend.coverage import written_in_full
from adoffload.jax.handler import layout_for


@ado.kernel
def scale(a: ado.f64, x: ado.In[ado.f64], y: ado.Out[ado.f64], total: ado.Out[ado.f64]):
    i = ado.tid()
    y[i] = a * x[i]
    ado.atomic_add(total, 0, x[i])


@ado.kernel
def grid2(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2], t: ado.Out[ado.f64, 2]):
    i, j = ado.tid()
    y[i, j] = x[i, j]
    t[j, i] = x[i, j]


@ado.kernel
def conditional(x: ado.In[ado.f64], y: ado.Out[ado.f64], z: ado.Out[ado.f64]):
    i = ado.tid()
    if x[i] > 0.0:
        y[i] = x[i]
    z[i] = 1.0


@ado.kernel
def early_return(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    if i == 0:
        return
    y[i] = x[i]


@ado.kernel
def rebound(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    i = i // 2
    y[i] = x[i]


def test_full_writes_are_top_level_stores_at_the_thread_index():
    assert scale.full_writes == {(2, (0,))}                # y, not the atomic total
    assert grid2.full_writes == {(1, (0, 1)), (2, (1, 0))}
    assert conditional.full_writes == {(2, (0,))}          # z only: y's store is conditional
    assert early_return.full_writes == frozenset()
    assert rebound.full_writes == frozenset()


def test_coverage_needs_the_grid_to_match_the_shape():
    writes = grid2.full_writes
    assert written_in_full(writes, 1, (4, 5), (4, 5))
    assert written_in_full(writes, 2, (5, 4), (4, 5))      # t[j, i]: axes swapped
    assert not written_in_full(writes, 1, (4, 6), (4, 5))  # the last column is never written
    assert not written_in_full(writes, 1, (4, 5), (0, 5))  # nothing runs


def test_forward_derivatives_write_the_tangents_of_full_writes():
    fwd = ado.jvp(scale, ["x"])
    names = [p.name for p in fwd.signature.params]
    assert (names.index("d_y"), (0,)) in fwd.full_writes
    assert all(names[k] != "d_total" for k, _ in fwd.full_writes)


def test_host_launch_keeps_zeroing_what_it_must():
    x = np.arange(1.0, 6.0)
    y, total = np.full(5, 7.0), np.full(1, 7.0)
    scale(2.0, x, y, total, grid=5)
    np.testing.assert_array_equal(y, 2 * x)
    assert total[0] == x.sum()                            # zeroed first: an accumulator
    y = np.full(6, 7.0)
    scale(2.0, np.arange(1.0, 7.0), y, total, grid=5)
    assert y[5] == 0.0                                    # grid < shape: zeroed first


def test_jax_handlers_skip_the_memset_only_for_full_writes():
    zeroed_params = lambda written: [r for r, _, _ in layout_for(scale.signature, scalars_by_reference=False,
                                                                    written=written).zeroed]
    assert zeroed_params(frozenset()) == [0, 1]
    assert zeroed_params(frozenset({2})) == [1]
