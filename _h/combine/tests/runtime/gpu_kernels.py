"""Tiny packed-slot GPU kernels for runtime tests, lowered to PTX by llvmlite's NVPTX target.

``scale(ptr out, float a, i64 grid0, ptr status)``: out[i] = a * i for i < grid0, with the
linear thread id of the launch contract: (ctaid.y * nctaid.x + ctaid.x) * ntid.x + tid.x.
Passing an invalid ``out`` (e.g. 0x10) makes it fault with an illegal address.
"""
from __future__ import annotations

import llvmlite.binding as llvm

SCALE_IR = r"""
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()

define ptx_kernel void @scale(ptr %out, float %a, i64 %grid0, ptr %status) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %bx = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %by = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()
  %nbx = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %by64 = zext i32 %by to i64
  %nbx64 = zext i32 %nbx to i64
  %bx64 = zext i32 %bx to i64
  %ntid64 = zext i32 %ntid to i64
  %tid64 = zext i32 %tid to i64
  %rows = mul i64 %by64, %nbx64
  %block = add i64 %rows, %bx64
  %base = mul i64 %block, %ntid64
  %i = add i64 %base, %tid64
  %inside = icmp ult i64 %i, %grid0
  br i1 %inside, label %body, label %exit
body:
  %fi = uitofp i64 %i to float
  %v = fmul float %a, %fi
  %p = getelementptr float, ptr %out, i64 %i
  store volatile float %v, ptr %p
  br label %exit
exit:
  ret void
}
"""


def scale_ptx(arch: str = "sm_90") -> str:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = llvm.parse_assembly(SCALE_IR)
    module.verify()
    machine = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(cpu=arch, opt=2)
    return machine.emit_assembly(module)
