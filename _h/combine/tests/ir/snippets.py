"""Hand-written LLVM IR modules shared by the ir tests (each exercises a family of constructs)."""

CONTROL_FLOW = r'''
define i32 @count(i32 %n, i32 %k) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %latch ]
  %acc = phi i32 [ 0, %entry ], [ %acc.next, %latch ]
  switch i32 %k, label %other [ i32 1, label %one
                                i32 -2, label %latch ]
one:
  %a1 = add nsw i32 %acc, 1
  br label %latch
other:
  %a2 = mul i32 %acc, 3
  br label %latch
latch:
  %acc.next = phi i32 [ %a1, %one ], [ %a2, %other ], [ %acc, %loop ]
  %next = add nuw nsw i32 %i, 1
  %done = icmp sge i32 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret i32 %acc.next
}
'''

MEMORY = r'''
@table = internal constant [3 x double] [double 1.5, double -2.0, double 0x7FF0000000000000]
@hello = private unnamed_addr constant [3 x i8] c"hi\00"
%pair = type { double, i64 }

define double @memory(ptr noalias %out, ptr readonly %pairs, i64 %i) {
  %slot = getelementptr inbounds [3 x double], ptr @table, i64 0, i64 %i
  %t = load double, ptr %slot, align 8
  %p = getelementptr inbounds %pair, ptr %pairs, i64 %i, i32 0
  %v = load volatile double, ptr %p, align 8
  %s = fadd fast double %t, %v
  %old = atomicrmw fadd ptr %out, double %s syncscope("agent") monotonic, align 8
  %x = cmpxchg weak ptr %pairs, i64 0, i64 1 seq_cst acquire, align 8
  %ok = extractvalue { i64, i1 } %x, 1
  %agg = insertvalue { double, i64 } poison, double %s, 0
  %first = extractvalue { double, i64 } %agg, 0
  fence syncscope("agent") release
  store atomic double %first, ptr %out release, align 8
  %h = fptrunc double %first to half
  %h2 = fadd half %h, 0xH3C00
  %back = fpext half %h2 to double
  %r = select i1 %ok, double %back, double 0.000000e+00
  %fz = freeze double %r
  ret double %fz
}
'''

KERNELS = r'''
target triple = "nvptx64-nvidia-cuda"

define internal float @helper(float %x) alwaysinline {
  %y = fmul contract float %x, %x, !adoffload.loc !0
  ret float %y
}

define ptx_kernel void @k(ptr noalias readonly %x, ptr noalias %y, i64 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %i = zext i32 %tid to i64
  %in = icmp slt i64 %i, %n, !adoffload.loc !1
  br i1 %in, label %body, label %done
body:
  %px = getelementptr inbounds float, ptr %x, i64 %i
  %vx = load float, ptr %px, align 4, !adoffload.loc !1
  %sq = call float @helper(float %vx), !adoffload.loc !2
  %e = call fast float @llvm.exp.f32(float %sq)
  %py = getelementptr inbounds float, ptr %y, i64 %i
  store float %e, ptr %py, align 4, !adoffload.loc !2
  br label %done
done:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare float @llvm.exp.f32(float)

!0 = !{!"kernels.py", i32 3, i32 8}
!1 = !{!"kernels.py", i32 10, i32 4}
!2 = !{!"kernels.py", i32 11, i32 12}
'''

AMDGPU = r'''
target triple = "amdgcn-amd-amdhsa"

define amdgpu_kernel void @scale(ptr addrspace(1) %x, float %a) {
  %v = load float, ptr addrspace(1) %x, align 4
  %w = fmul float %v, %a
  store float %w, ptr addrspace(1) %x, align 4
  ret void
}
'''

UNNAMED = r'''
define double @anon(double %0, double %1) {
  %3 = fmul double %0, %1
  %4 = fadd double %3, 1.0
  br label %5
5:
  %6 = phi double [ %4, %2 ]
  ret double %6
}
'''

WITH_ALLOCAS = r'''
define double @with_allocas(double %a, i64 %n) {
entry:
  %acc = alloca double, align 8
  %i = alloca i64, align 8
  store double 0.0, ptr %acc
  store i64 0, ptr %i
  br label %cond
cond:
  %iv = load i64, ptr %i
  %more = icmp slt i64 %iv, %n
  br i1 %more, label %body, label %exit
body:
  %cur = load double, ptr %acc
  %new = fadd double %cur, %a
  store double %new, ptr %acc
  %inc = add i64 %iv, 1
  store i64 %inc, ptr %i
  br label %cond
exit:
  %r = load double, ptr %acc
  ret double %r
}
'''

INVOKE = r'''
declare void @may_throw()
declare i32 @__gxx_personality_v0(...)

define void @thrower() personality ptr @__gxx_personality_v0 {
entry:
  invoke void @may_throw() to label %ok unwind label %bad
ok:
  ret void
bad:
  %lp = landingpad { ptr, i32 } cleanup
  resume { ptr, i32 } %lp
}
'''

INLINE_ASM = r'''
define i32 @asm_user(i32 %x) {
  %y = call i32 asm "mov $0, $1", "=r,r"(i32 %x)
  ret i32 %y
}
'''

VECTORS = r'''
define <4 x float> @vectors(<4 x float> %a, <4 x float> %b, i64 %u) {
  %s = fadd <4 x float> %a, %b
  %e = extractelement <4 x float> %s, i32 1
  %i = insertelement <4 x float> %s, float %e, i64 0
  %sh = shufflevector <4 x float> %i, <4 x float> poison, <4 x i32> <i32 3, i32 2, i32 poison, i32 0>
  %c = fcmp olt <4 x float> %sh, <float 1.0, float 2.0, float 3.0, float 4.0>
  %r = select <4 x i1> %c, <4 x float> %sh, <4 x float> zeroinitializer
  %q = add i64 %u, undef
  %agg = insertvalue {double, i64} poison, i64 %q, 1
  ret <4 x float> %r
}
'''

ALL_SUPPORTED = {"vectors": VECTORS, "control_flow": CONTROL_FLOW, "memory": MEMORY, "kernels": KERNELS, "amdgpu": AMDGPU,
                 "unnamed": UNNAMED, "with_allocas": WITH_ALLOCAS}
