"""The host reduction of a contribution log (enzyme/deterministic.py), on hand-built logs."""
from __future__ import annotations

import numpy as np
import pytest

from adoffload.enzyme.deterministic import SHADOW_SHIFT, reduce_log
from adoffload.errors import DifferentiationError


def _log(entries):
    """[(shadow_id, byte_offset, value)] -> the i64 words of a log (None: an unused entry)."""
    words = np.zeros((len(entries), 2), np.int64)
    for row, entry in enumerate(entries):
        if entry is not None:
            shadow, offset, value = entry
            words[row, 0] = ((shadow + 1) << SHADOW_SHIFT) | offset
            words[row, 1] = np.float64(value).view(np.int64)
    return words.reshape(-1)


def test_totals_are_summed_in_f64_and_added_once():
    d_x = np.array([5.0, 0.0, -0.0], np.float32)
    d_w = np.array([2.0])
    log = _log([(0, 4, 1e8), (1, 0, 0.25), None, (0, 4, 1.0), (0, 4, -1e8), (1, 0, 0.5)])
    reduce_log(log, [d_x, d_w])
    # float32 adds one at a time would lose the 1.0 next to 1e8; the f64 total keeps it
    np.testing.assert_array_equal(d_x, np.array([5.0, 1.0, -0.0], np.float32))
    assert np.signbit(d_x[2])                     # untouched elements keep their bits
    np.testing.assert_array_equal(d_w, [2.75])


def test_multidimensional_shadows_use_flat_byte_offsets():
    d = np.zeros((2, 3))
    reduce_log(_log([(0, 8 * 5, 1.5), (0, 8 * 1, -2.0), (0, 8 * 5, 1.0)]), [d])
    np.testing.assert_array_equal(d, [[0, -2.0, 0], [0, 0, 2.5]])


def test_corrupt_logs_are_reported():
    with pytest.raises(DifferentiationError, match="shadow id"):
        reduce_log(_log([(3, 0, 1.0)]), [np.zeros(2)])
    with pytest.raises(DifferentiationError, match="element 9"):
        reduce_log(_log([(0, 8 * 9, 1.0)]), [np.zeros(2)])
