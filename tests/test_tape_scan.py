"""The device prefix sum of dynamic-tape counts (tape_scan.py), run on the host: exclusive offsets
and the total for lengths around each chunk level, and the handler's fixed level sizes."""
import numpy as np
import pytest

from adoffload.runtime import get_device
from adoffload.kernels.kernel import scan_kernels
from adoffload.kernels.launch import launch
from adoffload.kernels.tape_scan import CHUNK, HANDLER_LEVELS, exclusive_scan_on_device, level_sizes


@pytest.mark.parametrize("n", [1, 2, CHUNK, CHUNK + 1, CHUNK * CHUNK, CHUNK * CHUNK + 3])
def test_offsets_are_the_exclusive_prefix_sum(n):
    counts = np.random.default_rng(n).integers(0, 9, n).astype(np.int64) * 8
    offsets = counts.copy()
    total = exclusive_scan_on_device(offsets, get_device("cpu"), scan_kernels(), launch)
    assert total == counts.sum()
    np.testing.assert_array_equal(offsets, np.concatenate([[0], np.cumsum(counts)[:-1]]))


def test_level_sizes():
    assert level_sizes(5) == [5]
    assert level_sizes(CHUNK + 1) == [CHUNK + 1, 2]
    assert level_sizes(CHUNK ** 2 + 1) == [CHUNK ** 2 + 1, CHUNK + 1, 2]
    fixed = level_sizes(1 << 39, HANDLER_LEVELS)
    assert len(fixed) == HANDLER_LEVELS + 1 and fixed[-1] == (1 << 39) // CHUNK ** HANDLER_LEVELS
    assert level_sizes(3, HANDLER_LEVELS) == [3, 1, 1, 1, 1]


def _cuda_devices() -> int:
    from adoffload.runtime.devices import device_count
    return device_count("cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_devices(), reason="no NVIDIA GPU / driver")
def test_offsets_on_a_cuda_device():
    from adoffload.runtime.dlpack import DeviceArray
    n = CHUNK ** 3 + 11                                    # three chunk levels
    counts = np.random.default_rng(7).integers(0, 9, n).astype(np.int64) * 8
    on_device = DeviceArray.from_numpy(counts, device="cuda")
    try:
        total = exclusive_scan_on_device(on_device, get_device("cuda"), scan_kernels(), launch)
        offsets = on_device.to_numpy()
    finally:
        get_device("cuda").free(on_device.buffer)
    assert total == counts.sum()
    np.testing.assert_array_equal(offsets, np.concatenate([[0], np.cumsum(counts)[:-1]]))
