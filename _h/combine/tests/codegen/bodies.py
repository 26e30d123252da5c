"""Hand-written kernel bodies (docs/ARCHITECTURE.md §1) used by the code generation tests."""
from __future__ import annotations


def bounds_check(label: str, index: str, shape: str, param_index: int, dim: int) -> str:
    """IR for the body's bounds-check protocol; continues at %<label>.ok when in bounds."""
    return f"""
  %{label}.in = icmp ult i64 {index}, {shape}
  br i1 %{label}.in, label %{label}.ok, label %{label}.bad
{label}.bad:
  %{label}.old = atomicrmw xchg ptr %status, i64 1 seq_cst
  %{label}.first = icmp eq i64 %{label}.old, 0
  br i1 %{label}.first, label %{label}.record, label %{label}.out
{label}.record:
  %{label}.w1 = getelementptr i64, ptr %status, i64 1
  store i64 {param_index}, ptr %{label}.w1
  %{label}.w2 = getelementptr i64, ptr %status, i64 2
  store i64 {index}, ptr %{label}.w2
  %{label}.w3 = getelementptr i64, ptr %status, i64 3
  store i64 {dim}, ptr %{label}.w3
  br label %{label}.out
{label}.out:
  ret void
{label}.ok:"""


# axpy(a: f32, x: In[f32], y: In[f32], out: Out[f32]) with bounds checks on every access.
AXPY_TYPES = ["float", "ptr", "i64", "ptr", "i64", "ptr", "i64"]
AXPY = f"""
define void @axpy(i64 %tid0, float %a, ptr %x, i64 %x.shape0, ptr %y, i64 %y.shape0,
                  ptr %out, i64 %out.shape0, ptr %status) {{
entry:
{bounds_check("cx", "%tid0", "%x.shape0", 1, 0)}
{bounds_check("cy", "%tid0", "%y.shape0", 2, 0)}
{bounds_check("co", "%tid0", "%out.shape0", 3, 0)}
  %px = getelementptr float, ptr %x, i64 %tid0
  %vx = load float, ptr %px
  %py = getelementptr float, ptr %y, i64 %tid0
  %vy = load float, ptr %py
  %ax = fmul float %a, %vx
  %r = fadd float %ax, %vy
  %po = getelementptr float, ptr %out, i64 %tid0
  store float %r, ptr %po
  ret void
}}
"""

# grid2(scale: f64, flag: bool, k: i32, out: Out[f64, 2]):
#   out[i, j] = scale * (i * 100 + j) + k + (flag ? 0.5 : 0)
GRID2_TYPES = ["double", "i1", "i32", "ptr", "i64", "i64"]
GRID2 = """
define void @grid2(i64 %tid0, i64 %tid1, double %scale, i1 %flag, i32 %k, ptr %out,
                   i64 %out.shape0, i64 %out.shape1, ptr %status) {
entry:
  %i100 = mul i64 %tid0, 100
  %ij = add i64 %i100, %tid1
  %f = sitofp i64 %ij to double
  %s = fmul double %scale, %f
  %kf = sitofp i32 %k to double
  %t = fadd double %s, %kf
  %half = select i1 %flag, double 0.5, double 0.0
  %v = fadd double %t, %half
  %row = mul i64 %tid0, %out.shape1
  %idx = add i64 %row, %tid1
  %p = getelementptr double, ptr %out, i64 %idx
  store double %v, ptr %p
  ret void
}
"""

# grid3(out: Out[i64, 3]): out[i, j, l] = i * 10000 + j * 100 + l
GRID3_TYPES = ["ptr", "i64", "i64", "i64"]
GRID3 = """
define void @"grid3.fwd"(i64 %tid0, i64 %tid1, i64 %tid2, ptr %out, i64 %s0, i64 %s1, i64 %s2,
                   ptr %status) {
entry:
  %a = mul i64 %tid0, 10000
  %b = mul i64 %tid1, 100
  %ab = add i64 %a, %b
  %v = add i64 %ab, %tid2
  %r0 = mul i64 %tid0, %s1
  %r1 = add i64 %r0, %tid1
  %r2 = mul i64 %r1, %s2
  %idx = add i64 %r2, %tid2
  %p = getelementptr i64, ptr %out, i64 %idx
  store i64 %v, ptr %p
  ret void
}
"""

# mathfn(x: In[T], out: Out[T, 2]): out[0, i] = sin(x), out[1, i] = exp(x), out[2, i] = pow(x, 1.5),
# out[3, i] = erf(x), out[4, i] = tanh(x), out[5, i] = atan2(x, 0.75)  (no bounds checks)
def math_body(ty: str) -> str:
    suffix = "f32" if ty == "float" else "f64"
    erf = "erff" if ty == "float" else "erf"
    lines = []
    ops = [("sin", f"call {ty} @llvm.sin.{suffix}({ty} %v)"),
           ("exp", f"call {ty} @llvm.exp.{suffix}({ty} %v)"),
           ("pow", f"call {ty} @llvm.pow.{suffix}({ty} %v, {ty} 1.5)"),
           ("erf", f"call {ty} @{erf}({ty} %v)"),
           ("tanh", f"call {ty} @llvm.tanh.{suffix}({ty} %v)"),
           ("atan2", f"call {ty} @llvm.atan2.{suffix}({ty} %v, {ty} 0.75)")]
    for row, (name, call) in enumerate(ops):
        lines.append(f"  %{name} = {call}")
        lines.append(f"  %{name}.row = mul i64 {row}, %out.shape1")
        lines.append(f"  %{name}.idx = add i64 %{name}.row, %tid0")
        lines.append(f"  %{name}.p = getelementptr {ty}, ptr %out, i64 %{name}.idx")
        lines.append(f"  store {ty} %{name}, ptr %{name}.p")
    body = "\n".join(lines)
    return f"""
declare {ty} @llvm.sin.{suffix}({ty})
declare {ty} @llvm.exp.{suffix}({ty})
declare {ty} @llvm.pow.{suffix}({ty}, {ty})
declare {ty} @llvm.tanh.{suffix}({ty})
declare {ty} @llvm.atan2.{suffix}({ty}, {ty})
declare {ty} @{erf}({ty})

define void @mathfn(i64 %tid0, ptr %x, i64 %x.shape0, ptr %out, i64 %out.shape0, i64 %out.shape1,
                    ptr %status) {{
entry:
  %px = getelementptr {ty}, ptr %x, i64 %tid0
  %v = load {ty}, ptr %px
{body}
  ret void
}}
"""


MATH_TYPES = ["ptr", "i64", "ptr", "i64", "i64"]
MATH_OPS = 6
