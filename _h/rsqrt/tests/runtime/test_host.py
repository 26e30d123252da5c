"""The host device: memory, module loading, chunked launch over the thread pool."""
from __future__ import annotations

import numpy as np
import pytest

from adoffload.errors import ArgumentError, DeviceError, DeviceNotFoundError, GridError
from adoffload.runtime import get_device, available_devices, parse_spec
from adoffload.runtime.host import HostDevice, HostFunction


def test_get_device_is_cached_and_accepts_aliases():
    cpu = get_device("cpu")
    assert get_device("host") is cpu and get_device(" CPU ") is cpu and get_device(cpu) is cpu
    assert get_device(None) is cpu
    assert cpu.kind == "cpu" and cpu.ordinal == 0 and cpu.spec == "cpu"
    assert available_devices()[0] is cpu


@pytest.mark.parametrize("spec, expected", [("cuda", ("cuda", 0)), ("cuda:3", ("cuda", 3)),
                                            ("hip:1", ("hip", 1)), ("host", ("cpu", 0))])
def test_parse_spec(spec, expected):
    assert parse_spec(spec) == expected


@pytest.mark.parametrize("spec", ["tpu", "cuda:x", "cpu:1", "cuda:-1"])
def test_bad_specs_are_rejected(spec):
    with pytest.raises(DeviceNotFoundError):
        parse_spec(spec)


def test_memory_round_trip_and_memset():
    dev = HostDevice()
    data = np.arange(37, dtype=np.float32)
    buf = dev.to_device(data)
    assert buf.nbytes == data.nbytes and buf.ptr % 64 == 0 and buf.device is dev
    back = np.empty_like(data)
    dev.copy_to_host(buf, back)
    np.testing.assert_array_equal(back, data)
    dev.memset(buf, 0)
    dev.copy_to_host(buf, back)
    assert not back.any()
    dev.free(buf)
    with pytest.raises(DeviceError):
        dev.copy_to_host(buf, back)


def test_copy_rejects_too_large_and_non_contiguous():
    dev = HostDevice()
    buf = dev.allocate(16)
    with pytest.raises(ArgumentError, match="32"):
        dev.copy_to_device(buf, np.zeros(4, np.float64))
    with pytest.raises(ArgumentError, match="C-contiguous"):
        dev.copy_to_device(buf, np.zeros((4, 4), np.float32)[:, 0])


@pytest.mark.parametrize("total, block", [(0, None), (1, None), (31, None), (1000, None),
                                          (1000, 7), (100_003, None)])
def test_launch_covers_every_thread_exactly(twice_program, total, block):
    dev = HostDevice(workers=3)
    out = np.full(total + 5, -1, dtype=np.int64)
    fn = dev.load_module(twice_program).function("twice.host")
    assert isinstance(fn, HostFunction)
    slots = np.array([out.ctypes.data, total, 0], dtype=np.uint64)
    dev.launch(fn, total, slots, block_size=block)
    np.testing.assert_array_equal(out[:total], 2 * np.arange(total))
    assert (out[total:] == -1).all()       # nothing past the grid was touched


def test_chunks_partition_the_grid():
    dev = HostDevice(workers=4)
    for total in (1, 32, 33, 1000, 12345):
        parts = dev.chunks(total)
        assert parts[0][0] == 0 and parts[-1][1] == total
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
        assert len(parts) <= 16
    assert dev.chunks(32) == [(0, 32)]        # small grids run inline
    assert dev.chunks(10, block_size=4) == [(0, 4), (4, 8), (8, 10)]


@pytest.mark.parametrize("workers", [2, 4])
def test_launch_runs_chunks_concurrently(barrier_program, workers):
    dev = HostDevice(workers=workers)
    fn = dev.load_module(barrier_program).function("barrier.host")
    counters = np.zeros(2, dtype=np.int64)
    # One chunk per worker; every chunk waits for all the others (bounded spin).
    slots = np.array([counters.ctypes.data, counters.ctypes.data + 8, workers, 2_000_000_000],
                     dtype=np.uint64)
    dev.launch(fn, workers, slots, block_size=1)
    assert counters[0] == workers
    assert counters[1] == workers, "chunks ran one after another: the GIL was not released"


def test_launch_argument_checks(twice_program):
    dev = HostDevice()
    fn = dev.load_module(twice_program).function("twice.host")
    with pytest.raises(ArgumentError, match="uint64"):
        dev.launch(fn, 4, np.zeros(3, np.int64))
    with pytest.raises(GridError):
        dev.launch(fn, -1, np.zeros(3, np.uint64))
    with pytest.raises(ArgumentError):
        dev.launch("twice.host", 4, np.zeros(3, np.uint64))


def test_missing_function_and_bad_image(twice_program):
    dev = HostDevice()
    with pytest.raises(DeviceError, match="nope"):
        dev.load_module(twice_program).function("nope")
    with pytest.raises(ArgumentError):
        dev.load_module(42)
    mod = dev.load_module({"twice.host": twice_program.address("twice.host")})
    assert mod.function("twice.host") is mod.function("twice.host")


def test_events_and_streams():
    dev = HostDevice()
    start, stop = dev.event().record(), dev.event()
    sum(range(10000))
    stop.record(dev.stream())
    assert stop.elapsed_ms(start) <= 0 <= start.elapsed_ms(stop)
    with pytest.raises(DeviceError):
        dev.event().elapsed_ms(stop)


def test_view_and_as_buffer_share_memory():
    dev = HostDevice()
    data = np.arange(6, dtype=np.int32)
    buf = dev.as_buffer(data)
    view = dev.view(buf, np.int32, (2, 3))
    view[1, 2] = 99
    assert data[5] == 99
