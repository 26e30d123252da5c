"""The host's barrier splitting on hand-written IR: threads of a block that stop at different
barriers (which the front end never emits) stop the block with a status, never wrong values."""
from pathlib import Path

import numpy as np
import pytest

from adoffload.language import status as abi_status
from adoffload.codegen import blocks
from adoffload.codegen.slots import pack_slots
from adoffload.codegen.host.program import HostProgram
from adoffload.errors import KernelFaultError
from adoffload.language.signature import KernelSignature, Param
from adoffload.language.types import ArrayType, f64


def test_threads_at_different_barriers_stop_the_block_with_a_status():
    text = (Path(__file__).parent / "diverged_barrier.ll").read_text()
    program = HostProgram(blocks.add_block_host_entry(text, "k", ["ptr", "i64"], 1, (4,), ()))
    x, status = np.zeros(8), abi_status.new_record()
    slots = pack_slots([x, 8], ["ptr", "i64"], (8,), status.ctypes.data)
    program.entry("k.host")(slots.ctypes.data, 0, 8)
    assert status[0] == abi_status.DIVERGED
    np.testing.assert_array_equal(x[0::2], 0.0)       # the even threads never ran past their barrier
    signature = KernelSignature("k", (Param("x", ArrayType(f64, 1, "inout")),), 1)
    with pytest.raises(KernelFaultError, match=r"reached different barriers"):
        abi_status.raise_for_status(status, signature)
