"""Shared helpers for runtime tests: tiny host entries compiled with llvmlite MCJIT."""
from __future__ import annotations

import llvmlite.binding as llvm
import pytest


class JitProgram:
    """A host program compiled from LLVM IR text; exposes ``.address(name)`` like codegen's."""

    def __init__(self, text: str):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = llvm.parse_assembly(text)
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(opt=2)
        self.engine = llvm.create_mcjit_compiler(module, machine)
        self.engine.finalize_object()

    def address(self, name: str) -> int:
        return self.engine.get_function_address(name)


# out[tid] = 2 * tid for tid in [start, end); slot 0 holds the i64 array's address.
TWICE_TID = r"""
define void @"twice.host"(ptr %slots, i64 %start, i64 %end) {
entry:
  %out.bits = load i64, ptr %slots
  %out = inttoptr i64 %out.bits to ptr
  %empty = icmp sge i64 %start, %end
  br i1 %empty, label %done, label %loop
loop:
  %tid = phi i64 [ %start, %entry ], [ %next, %loop ]
  %value = shl i64 %tid, 1
  %where = getelementptr i64, ptr %out, i64 %tid
  store i64 %value, ptr %where
  %next = add i64 %tid, 1
  %more = icmp slt i64 %next, %end
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""

# A barrier that proves chunks run at the same time: every call bumps slot0's counter, then
# spins (bounded by slot3 iterations) until the counter reaches slot2; calls that saw it
# reach the target bump slot1's counter. If the GIL serialized the calls, the first call
# could never see the others arrive.
BARRIER = r"""
define void @"barrier.host"(ptr %slots, i64 %start, i64 %end) {
entry:
  %counter.bits = load i64, ptr %slots
  %counter = inttoptr i64 %counter.bits to ptr
  %seen.slot = getelementptr i64, ptr %slots, i64 1
  %seen.bits = load i64, ptr %seen.slot
  %seen = inttoptr i64 %seen.bits to ptr
  %target.slot = getelementptr i64, ptr %slots, i64 2
  %target = load i64, ptr %target.slot
  %limit.slot = getelementptr i64, ptr %slots, i64 3
  %limit = load i64, ptr %limit.slot
  %old = atomicrmw add ptr %counter, i64 1 seq_cst
  br label %spin
spin:
  %i = phi i64 [ 0, %entry ], [ %i.next, %again ]
  %now = load atomic i64, ptr %counter seq_cst, align 8
  %arrived = icmp sge i64 %now, %target
  br i1 %arrived, label %saw, label %again
again:
  %i.next = add i64 %i, 1
  %give.up = icmp sge i64 %i.next, %limit
  br i1 %give.up, label %done, label %spin
saw:
  %unused = atomicrmw add ptr %seen, i64 1 seq_cst
  br label %done
done:
  ret void
}
"""


@pytest.fixture(scope="session")
def twice_program():
    return JitProgram(TWICE_TID)


@pytest.fixture(scope="session")
def barrier_program():
    return JitProgram(BARRIER)
