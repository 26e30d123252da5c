"""Which Out arrays a kernel writes in full (so launches and JAX calls skip zeroing them)."""
import numpy as np

import adoffload as ado
from adoffload.frontend.coverage import written_in_full
from adoffload.jax.ffi_layout import layout_for


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
    assert scale.full_writes == {(2, ((0, 1),))}                # y, not the atomic total
    assert grid2.full_writes == {(1, ((0, 1), (1, 1))), (2, ((1, 1), (0, 1)))}
    assert conditional.full_writes == {(2, ((0, 1),))}          # z only: y's store is conditional
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
    assert (names.index("d_y"), ((0, 1),)) in fwd.full_writes
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


ROWS = 4                       # a global constant the index expressions use


@ado.kernel
def four_rows(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    i = ado.tid()
    r = ROWS * i
    y[r] = x[r]
    y[r + 1] = x[r + 1] * 2.0
    y[r + 3] = x[r + 3]
    y[r + 2] = -x[r + 2]


@ado.kernel
def three_of_four_rows(x: ado.In[ado.f64], y: ado.Out[ado.f64]):
    """Row 4i + 2 is never written."""
    i = ado.tid()
    y[4 * i] = x[4 * i]
    y[4 * i + 1] = x[4 * i + 1]
    y[4 * i + 3] = x[4 * i + 3]


@ado.kernel(block=(2, 4))
def block_rows(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """Each thread writes rows 4ti .. 4ti+3 of its column inside an 8-row, 4-column block tile."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    r0 = bi * 8 + ti * 4
    c = bj * 4 + tj
    y[r0, c] = x[r0, c]
    y[r0 + 1, c] = x[r0 + 1, c]
    y[r0 + 2, c] = x[r0 + 2, c]
    y[r0 + 3, c] = x[r0 + 3, c]


@ado.kernel(block=(2, 4))
def block_rows_gap(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """bi steps by 16 rows while a block fills 8: half of the rows are never written."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    r0 = bi * 16 + ti * 4
    c = bj * 4 + tj
    y[r0, c] = x[r0, c]
    y[r0 + 1, c] = x[r0 + 1, c]
    y[r0 + 2, c] = x[r0 + 2, c]
    y[r0 + 3, c] = x[r0 + 3, c]


@ado.kernel(block=(2, 4))
def block_strided(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """sgemm_static's layout: thread ti writes rows ti, ti + 2, ti + 4, ti + 6 of an 8-row tile."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    c = bj * 4 + tj
    y[bi * 8 + ti, c] = x[bi * 8 + ti, c]
    y[bi * 8 + ti + 2, c] = x[bi * 8 + ti + 2, c]
    y[bi * 8 + ti + 4, c] = x[bi * 8 + ti + 4, c]
    y[bi * 8 + ti + 6, c] = x[bi * 8 + ti + 6, c]


@ado.kernel(block=(2, 4))
def block_rows_rebound(x: ado.In[ado.f64, 2], y: ado.Out[ado.f64, 2]):
    """r0 changes under a condition before the writes: nothing is claimed."""
    ti, tj = ado.thread_id()
    bi, bj = ado.block_id()
    r0 = bi * 8 + ti * 4
    if x[0, 0] > 100.0:
        r0 = 0
    c = bj * 4 + tj
    y[r0, c] = x[r0, c]
    y[r0 + 1, c] = x[r0 + 1, c]
    y[r0 + 2, c] = x[r0 + 2, c]
    y[r0 + 3, c] = x[r0 + 3, c]


def test_several_writes_per_thread_cover_scaled_grids():
    assert four_rows.full_writes == {(1, ((0, 4),))}
    assert three_of_four_rows.full_writes == frozenset()
    assert block_rows.full_writes == {(1, ((0, 4), (1, 1)))}
    assert block_strided.full_writes == {(1, ((0, 4), (1, 1)))}
    assert block_rows_gap.full_writes == frozenset()
    assert block_rows_rebound.full_writes == frozenset()
    assert written_in_full(block_rows.full_writes, 1, (16, 8), (4, 8))
    assert not written_in_full(block_rows.full_writes, 1, (16, 8), (2, 8))    # grid too small: rows 8.. unwritten


def test_launches_without_zeroing_give_the_same_outputs():
    """Whatever the coverage claims, a launch into an array full of garbage gives the kernel's
    output: every element the claim skips zeroing is written."""
    rng = np.random.default_rng(5)
    cases = [(four_rows, (32,), (8,)), (block_rows, (16, 8), (4, 8)), (block_strided, (16, 8), (4, 8))]
    for kernel, shape, grid in cases:
        x = rng.standard_normal(shape)
        y = np.full(shape, np.nan)
        kernel(x, y, grid=grid)
        want = x.copy()
        if kernel is four_rows:
            want[1::4] *= 2.0
            want[2::4] *= -1.0
        np.testing.assert_array_equal(y, want, err_msg=kernel.name)
