"""The reverse of a store that other threads may also make (every thread writing its block's result,
``out[0] = a * x[0]`` by each thread): the seed must reach one thread only. A load of the seed then a
store of zero hands it to every thread that loads before the first zero lands: on a GPU, all lanes
of a warp at once (the gradient times the threads). Such stores take the seed with one atomic
exchange; a store at the thread's own element keeps the plain load and store."""
from __future__ import annotations

import numpy as np

from .test_parallel import _grid_check, _reverse_text
from .test_reverse_support import CONST, DUP

# every thread stores w[0] * x[0] into out[0], and x[tid]^2 into sq[tid]
SAME_ELEMENT = """
define void @f(i64 %tid, ptr %x, ptr %w, ptr %out, ptr %sq) {
entry:
  %x0 = load double, ptr %x
  %w0 = load double, ptr %w
  %r = fmul double %w0, %x0
  store double %r, ptr %out
  %px = getelementptr double, ptr %x, i64 %tid
  %v = load double, ptr %px
  %s = fmul double %v, %v
  %ps = getelementptr double, ptr %sq, i64 %tid
  store double %s, ptr %ps
  ret void
}
"""


def test_a_store_several_threads_make_passes_its_seed_to_one_of_them():
    module, result = _grid_check(SAME_ELEMENT, [CONST, DUP, DUP, DUP, DUP],
                                 lambda: [0, np.array([0.5, -1.2, 2.0, 0.3]), np.array([1.7]), np.zeros(1),
                                          np.zeros(4)], 4)
    text = _reverse_text(module, result)
    assert text.count("atomicrmw xchg") == 1 and 'atomicrmw xchg ptr %"d_out"' in text, text   # out[0]: exchanged
    assert 'load double, ptr %"ps.shadow"' in text, text                                     # sq[tid]: plain


# out[tid / 4] = x[tid / 4]^2: every thread of a "block" of 4 stores its block's element
BLOCK_RESULT = """
define void @f(i64 %tid, ptr %x, ptr %out) {
entry:
  %blk = udiv i64 %tid, 4
  %px = getelementptr double, ptr %x, i64 %blk
  %v = load double, ptr %px
  %s = fmul double %v, %v
  %po = getelementptr double, ptr %out, i64 %blk
  store double %s, ptr %po
  ret void
}
"""

# the same, stored by the block's first thread only (if (threadIdx.x == 0))
FIRST_THREAD = BLOCK_RESULT.replace("""  store double %s, ptr %po
  ret void""", """  %lane = urem i64 %tid, 4
  %first = icmp eq i64 %lane, 0
  br i1 %first, label %write, label %done
write:
  store double %s, ptr %po
  br label %done
done:
  ret void""")

# out[(tid * 7) % 16]: not provably the thread's own element, but not the block's either
SCATTERED = BLOCK_RESULT.replace("%po = getelementptr double, ptr %out, i64 %blk", """%m = mul i64 %tid, 7
  %k = urem i64 %m, 16
  %po = getelementptr double, ptr %out, i64 %k""")


def test_every_thread_of_a_block_storing_its_result_passes_the_seed_to_one():
    module, result = _grid_check(BLOCK_RESULT, [CONST, DUP, DUP],
                                 lambda: [0, np.array([0.5, -1.2]), np.zeros(2)], 8)
    assert 'atomicrmw xchg ptr %"po.shadow"' in _reverse_text(module, result)


def test_a_store_under_a_thread_equality_or_at_a_lane_dependent_address_stays_plain():
    """One writer per block (threadIdx.x == 0), and addresses merely not proven private (a stencil's
    row * nx + column): the plain load and store of zero, which forward-over-reverse differentiates."""
    for text, threads in ((FIRST_THREAD, 8), (SCATTERED, 16)):
        module, result = _grid_check(text, [CONST, DUP, DUP],
                                     lambda: [0, np.array([0.5, -1.2, 0.7, 2.0]), np.zeros(16)], threads)
        assert "atomicrmw xchg" not in _reverse_text(module, result)
