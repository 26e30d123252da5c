"""``python -m adoffload``: doctor, and compile for every --emit and --mode, run as a subprocess
on examples/kernels.py; error cases print one line and exit with status 1."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from adoffload.codegen.gpu import tools
from adoffload.errors import ToolNotFoundError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/kernels.py"


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adoffload", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def compile_ok(*args: str) -> str:
    done = cli("compile", *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def _have(finder) -> bool:
    try:
        finder()
        return True
    except ToolNotFoundError:
        return False


def test_doctor_reports_every_probe():
    done = cli("doctor")
    assert done.returncode == 0, done.stderr
    names = [line.split("  ", 1)[0].strip() for line in done.stdout.splitlines()]
    for probe in ("python", "adoffload", "llvmlite", "jax", "host device", "CUDA devices", "HIP devices",
                  "ptxas", "libdevice", "ld.lld"):
        assert probe in names, f"doctor has no '{probe}' line:\n{done.stdout}"
    assert "NVPTX yes" in done.stdout and "AMDGPU yes" in done.stdout


def test_emit_llvm_is_the_canonical_body():
    out = compile_ok(f"{EXAMPLE}:saxpy", "--emit", "llvm")
    assert re.search(r"^define void @saxpy\(i64 %tid0, float %a, ptr %x, i64 %x\.shape0", out, re.M)
    assert "saxpy.host" not in out and "saxpy.kernel" not in out


def test_emit_ir_shows_source_locations():
    out = compile_ok(f"{EXAMPLE}:saxpy", "--emit", "ir")
    assert out.startswith("define void @saxpy(")
    assert re.search(r"; \S*kernels\.py:18:\d+", out), "instructions should name their source line"


def test_emit_asm_is_host_assembly_of_the_entry():
    out = compile_ok(f"{EXAMPLE}:saxpy", "--emit", "asm")
    assert re.search(r"^\"?saxpy\.host\"?:", out, re.M)
    assert ".globl" in out and "define" not in out


@pytest.mark.skipif(not _have(tools.find_libdevice), reason="libdevice not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_emit_ptx_for_an_architecture(arch):
    out = compile_ok(f"{EXAMPLE}:saxpy", "--emit", "ptx", "--arch", arch)
    assert f".target {arch}" in out
    assert ".visible .entry saxpy_$_kernel(" in out


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_emit_gcn_for_an_architecture(arch):
    out = compile_ok(f"{EXAMPLE}:saxpy", "--emit", "gcn", "--arch", arch)
    assert f'.amdgcn_target "amdgcn-amd-amdhsa--{arch}"' in out
    assert re.search(r"^\"?saxpy\.kernel\"?:", out, re.M)


def test_default_arch_is_sm_90_for_ptx():
    assert ".target sm_90" in compile_ok(f"{EXAMPLE}:saxpy", "--emit", "ptx")


def test_jvp_ir_has_tangent_parameters():
    out = compile_ok(f"{EXAMPLE}:saxpy", "--emit", "ir", "--mode", "jvp", "--wrt", "a,x")
    header = out.splitlines()[0]
    assert header.startswith("define void @saxpy.jvp(")
    assert "float %d_a" in header and "ptr %d_x" in header and "ptr %d_out" in header
    assert "%d_y" not in header, "y was not asked for"


def test_vjp_ir_is_only_the_derivative():
    out = compile_ok(f"{EXAMPLE}:lj_energy", "--emit", "ir", "--mode", "vjp", "--wrt", "pos")
    defines = re.findall(r"^define \S+ @([\w.\"]+)\(", out, re.M)
    assert defines and defines[0] == "lj_energy.vjp", defines
    assert "lj_energy" not in defines, "the primal body is not part of the derivative listing"
    assert "ptr %d_pos" in out.splitlines()[0] and "ptr %d_e" in out.splitlines()[0]
    assert "fmul double" in out and "kernels.py:" in out


def test_lean_vjp_stores_no_primal_output_and_keeps_the_seed():
    full = compile_ok(f"{EXAMPLE}:saxpy", "--emit", "llvm", "--mode", "vjp", "--wrt", "x")
    lean = compile_ok(f"{EXAMPLE}:saxpy", "--emit", "llvm", "--mode", "vjp", "--wrt", "x", "--lean")
    stores = lambda text: len(re.findall(r"^\s*store float", text.split("@saxpy.vjp(")[1], re.M))  # noqa: E731
    assert stores(full) == 3 and stores(lean) == 1, (full, lean)     # out[i], d_out[i] = 0, d_x[i] +=
    assert compile_ok(f"{EXAMPLE}:saxpy", "--emit", "llvm", "--mode", "primal") != ""
    done = cli("compile", f"{EXAMPLE}:saxpy", "--lean")
    assert done.returncode == 1 and "--lean needs --mode jvp or --mode vjp" in done.stderr


def test_vjp_default_wrt_is_every_float_input():
    header = compile_ok(f"{EXAMPLE}:lj_energy", "--emit", "ir", "--mode", "vjp").splitlines()[0]
    for name in ("d_pos", "d_sigma", "d_epsilon", "d_e"):
        assert f"%{name}" in header


@pytest.mark.skipif(not (_have(tools.find_libdevice) and _have(tools.find_ptxas)), reason="CUDA tools missing")
def test_vector_jvp_ptx_passes_ptxas(tmp_path):
    from adoffload.codegen.gpu import nvptx
    out = compile_ok(f"{EXAMPLE}:saxpy", "--emit", "ptx", "--mode", "jvp", "--width", "2", "--arch", "sm_80")
    assert ".visible .entry saxpy_$_jvp2_$_kernel(" in out
    assert "Compiling entry function 'saxpy_$_jvp2_$_kernel'" in nvptx.ptxas_check(out, "sm_80")


def test_vjp_gcn_and_llvm():
    gcn = compile_ok(f"{EXAMPLE}:lj_energy", "--emit", "gcn", "--mode", "vjp", "--wrt", "pos,sigma")
    assert re.search(r"^\"?lj_energy\.vjp\.kernel\"?:", gcn, re.M)
    llvm = compile_ok(f"{EXAMPLE}:lj_energy", "--emit", "llvm", "--mode", "vjp", "--wrt", "pos,sigma")
    assert re.search(r"^define void @lj_energy\.vjp\(", llvm, re.M)


@pytest.mark.parametrize("args, message", [
    (["nope/missing.py:saxpy"], "no such file: nope/missing.py"),
    ([f"{EXAMPLE}:nothing"], "has no kernel named 'nothing' (kernels there: saxpy, lj_energy)"),
    ([f"{EXAMPLE}:saxpy", "--emit", "ptx", "--arch", "sm_91"], "unknown architecture 'sm_91' for --emit ptx"),
    ([f"{EXAMPLE}:saxpy", "--emit", "gcn", "--arch", "sm_90"], "unknown architecture 'sm_90' for --emit gcn"),
    ([f"{EXAMPLE}:saxpy", "--arch", "sm_90"], "--arch applies to --emit ptx or gcn"),
    ([EXAMPLE], "expected FILE:KERNEL"),
    ([f"{EXAMPLE}:saxpy", "--mode", "vjp", "--wrt", "q"], "with respect to 'q': it is not a parameter"),
    ([f"{EXAMPLE}:saxpy", "--mode", "vjp", "--width", "2"], "--width applies to --mode jvp only"),
    ([f"{EXAMPLE}:saxpy", "--wrt", "x"], "--wrt needs --mode jvp or --mode vjp"),
])
def test_errors_are_one_line_with_status_1(args, message):
    done = cli("compile", *args)
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert message in lines[0]


def test_a_file_that_does_not_import_is_one_line(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import adoffload as ado\nx = (\n")
    done = cli("compile", f"{bad}:k")
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1
    assert "importing" in done.stderr and "SyntaxError" in done.stderr


def test_kernel_file_may_import_its_neighbours(tmp_path):
    (tmp_path / "helpers.py").write_text("SCALE = 3.0\n")
    (tmp_path / "k.py").write_text(
        "import adoffload as ado\nfrom helpers import SCALE\n\n"
        "@ado.kernel\ndef scale(x: ado.In[ado.f64], out: ado.Out[ado.f64]):\n"
        "    i = ado.tid()\n    out[i] = SCALE * x[i]\n")
    out = compile_ok(str(tmp_path / "k.py") + ":scale", "--emit", "llvm")
    assert "3.0" in out or "3.000000e+00" in out


STATS = "tests/fixtures/stats/scatter_kernels.py"


def test_stats_of_a_scatter_adjoint():
    out = compile_ok(f"{STATS}:neighbor_sum", "--stats", "--mode", "vjp", "--wrt", "x,w")
    assert out.startswith("neighbor_sum_vjp (vjp of neighbor_sum)\n")
    # d_x[j] is atomic in the loop; d_x[i] and the uniform d_w[1] are summed in registers
    assert "  atomics: fadd double: 1 per iteration, 1 per thread\n" in out
    assert "  uniform-address adds (one atomic per warp/block on GPUs): double: 1 per thread\n" in out
    assert re.search(r"^  loads: \d+ per iteration, \d+ per thread \(primal: 4 per iteration, 0 per thread\)$", out, re.M)
    assert "  tape: none\n" in out
    assert "  updates summed in registers: 2 in loops, added once as 2\n" in out


def test_stats_of_the_primal_lists_every_derivative_and_a_dynamic_tape():
    out = compile_ok(f"{STATS}:bounce", "--stats")
    assert [line for line in out.splitlines() if not line.startswith("  ")] == [
        "bounce (primal)", "bounce_jvp (jvp of bounce)", "bounce_vjp (vjp of bounce)"]
    assert "  tape: dynamic (sized per thread by a counting kernel)\n" in out
    assert out.count("  atomics: none\n") == 3


def test_stats_count_lane_combined_groups():
    out = compile_ok("benchmarks/kernels/rajaperf.py:lcals_eos", "--stats", "--mode", "vjp", "--lean", "--wrt", "u,y,z")
    assert out.startswith("lcals_eos_vjp (lean vjp of lcals_eos)\n")
    assert "  lane-combined adds (NVPTX, noalias launches): 1 group(s) of 7 adds," in out
    # the default adjoint reads d_y and d_z between its sites (codegen/gpu/lane_combining.py)
    out = compile_ok("benchmarks/kernels/rajaperf.py:lcals_eos", "--stats", "--mode", "vjp", "--wrt", "u,y,z")
    assert "  lane-combined adds (NVPTX, noalias launches): none\n" in out


def test_stats_refuses_a_width():
    done = cli("compile", f"{STATS}:bounce", "--stats", "--mode", "jvp", "--width", "2")
    assert done.returncode == 1 and done.stderr.startswith("error: --stats reports width-1 kernels")
