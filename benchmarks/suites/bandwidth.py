"""Physical limit: device-to-device copy bandwidth (cuMemcpyDtoD), the yardstick of streaming kernels.

Read and written bytes are both counted, as the RAJAPerf rows count the bytes their kernels move.
"""
from __future__ import annotations

DEVICES = ("cuda",)


def add_arguments(parser) -> None:
    parser.add_argument("--bytes", type=int, default=1 << 31, help="bytes copied per call (default 2 GiB)")


def run(rows, device: str, quick: bool, options) -> None:
    from ..gpu import Gpu
    nbytes = (1 << 26) if quick else options.bytes
    reps = options.reps or (5 if quick else 30)
    rows.append({"measure": f"device-to-device copy (cuMemcpyDtoD, {nbytes} bytes)", "bytes": nbytes,
                 "GB/s": Gpu().copy_bandwidth(nbytes, reps) / 1e9, "reps": reps})
