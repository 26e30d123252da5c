"""ado.from_c: C source through the wheel's clang, then the from_llvm path (issue 30)."""
import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.testing.clang import clang_available

pytestmark = pytest.mark.skipif(not clang_available(), reason="ado.from_c needs the ziglang wheel's clang")

SOURCE = """
#include <math.h>

double energy(double r, double s) {
    double q = s * s / r;
    return exp(-q) * sin(r) + q * q;
}

/* out[i] = sum_{j <= i} w[j] * x[j]^2: a prefix sum through memory */
void prefix(const double *x, const double *w, double *out, long n) {
    double acc = 0.0;
    for (long i = 0; i < n; i++) {
        acc += w[i] * x[i] * x[i];
        out[i] = acc;
    }
}
"""


def energy_reference(r, s):
    q = s * s / r
    return np.exp(-q) * np.sin(r) + q * q


@pytest.fixture(scope="module", params=[0, 1, 2, 3], ids=lambda o: f"O{o}")
def module(request):
    return ado.from_c(SOURCE, opt=request.param)


def test_values_at_every_level(module):
    assert module["energy"](1.3, 0.7) == pytest.approx(energy_reference(1.3, 0.7), rel=1e-14)
    x, w, out = np.array([0.5, -1.0, 2.0, 1.5]), np.array([1.0, 2.0, 0.5, -1.0]), np.zeros(4)
    module["prefix"](x, w, out, 4)
    np.testing.assert_allclose(out, np.cumsum(w * x * x), rtol=1e-14)


def test_scalar_gradient_against_central_differences(module):
    r, s, h = 1.3, 0.7, 1e-6
    d_r, d_s = ez.autodiff(ez.Reverse, module["energy"], ez.Active(r), ez.Active(s))
    fd_r = (energy_reference(r + h, s) - energy_reference(r - h, s)) / (2 * h)
    fd_s = (energy_reference(r, s + h) - energy_reference(r, s - h)) / (2 * h)
    assert d_r == pytest.approx(fd_r, rel=1e-7) and d_s == pytest.approx(fd_s, rel=1e-7)
    tangent = ez.autodiff(ez.Forward, module["energy"], ez.Duplicated(r, 0.3), ez.Duplicated(s, -2.0))
    assert tangent == pytest.approx(0.3 * d_r - 2.0 * d_s, rel=1e-12)


def test_array_derivatives_forward_reverse_identity_and_differences(module):
    rng = np.random.default_rng(3)
    n = 6
    x, w = rng.normal(size=n), rng.normal(size=n)
    v_x, v_w, seed = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    d_out = np.zeros(n)
    ez.autodiff(ez.Forward, module["prefix"], ez.Duplicated(x.copy(), v_x.copy()),
                ez.Duplicated(w.copy(), v_w.copy()), ez.Duplicated(np.zeros(n), d_out), n)
    g_x, g_w = np.zeros(n), np.zeros(n)
    ez.autodiff(ez.Reverse, module["prefix"], ez.Duplicated(x.copy(), g_x), ez.Duplicated(w.copy(), g_w),
                ez.Duplicated(np.zeros(n), seed.copy()), n)
    forward, reverse = d_out @ seed, v_x @ g_x + v_w @ g_w
    assert forward == pytest.approx(reverse, rel=1e-12)          # <J v, s> = <v, J^T s>

    def primal(xx, ww):
        out = np.zeros(n)
        module["prefix"](xx, ww, out, n)
        return out
    h = 1e-6
    fd = (primal(x + h * v_x, w + h * v_w) - primal(x - h * v_x, w - h * v_w)) / (2 * h)
    np.testing.assert_allclose(d_out, fd, rtol=1e-7, atol=1e-9)


def test_a_compile_error_names_its_line_and_column():
    source = "double f(double x) {\n    double y = x * 2.0;\n    return z + y;\n}\n"
    with pytest.raises(ado.ForeignCompileError, match=r"line 3, column 12: use of undeclared identifier 'z'") as info:
        ado.from_c(source)
    assert "<c source>:3:12" in str(info.value) and "/tmp" not in str(info.value)


def test_options_are_clang_flags():
    mod = ado.from_c("double scaled(double x) { return SCALE * x; }", options=["-DSCALE=3.0"])
    assert mod["scaled"](2.0) == 6.0
    with pytest.raises(ado.ForeignCompileError, match="SCALE"):
        ado.from_c("double scaled(double x) { return SCALE * x; }")


@pytest.mark.parametrize("kwargs, match", [
    ({"opt": 4}, "opt must be 0, 1, 2 or 3"), ({"opt": True}, "opt must be"), ({"options": [3]}, "clang flags"),
])
def test_bad_arguments_are_argument_errors(kwargs, match):
    with pytest.raises(ado.ArgumentError, match=match):
        ado.from_c("double f(double x) { return x; }", **kwargs)


def test_source_must_be_text():
    with pytest.raises(ado.ArgumentError, match="as a str"):
        ado.from_c(b"double f(double x) { return x; }")


def test_the_ir_is_cached_by_source_and_level(tmp_path, monkeypatch):
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path))
    from adoffload.sources import c as c_source
    calls = []
    real = c_source._compile
    monkeypatch.setattr(c_source, "_compile", lambda *a: calls.append(a) or real(*a))
    for opt in (1, 1, 2):
        assert ado.from_c("double f(double x) { return x * x; }", opt=opt)["f"](3.0) == 9.0
    assert [a[1] for a in calls] == [1, 2]


def test_argument_errors_name_the_c_parameter():
    mod = ado.from_c("void sq(const double *x, double *out, long n) { for (long i = 0; i < n; i++) out[i] = 2.0 * x[i]; }")   # vectorized at -O2
    with pytest.raises(ado.ArgumentError, match=r"argument 0 \('x'\) of @sq must have dtype float64"):
        mod["sq"](np.zeros(3, np.float32), np.zeros(3), 3)


def test_each_level_is_the_level_asked_for():
    """zig's cc maps -O1..-O3 to one level; from_c restores each (-O0 keeps optnone, -O1 does not
    vectorize, -O2 and -O3 do)."""
    from adoffload.sources.c import compile_c_to_llvm
    loop = "void scale(double *x, long n) { for (long i = 0; i < n; i++) x[i] *= 3.0; }"
    texts = {opt: compile_c_to_llvm(loop, opt) for opt in range(4)}
    assert "optnone" in texts[0] and "optnone" not in texts[1]
    assert "x double>" not in texts[1] and "x double>" in texts[2] and "x double>" in texts[3]


def test_a_goto_into_a_loop_is_refused_in_reverse_naming_its_line():
    """Irreducible control flow (two entries into one cycle) is refused by reverse mode; the error named
    only IR block names, now the C line of the branch too."""
    source = ("double f(double x, int k) {\n    double s = x; int i = 0;\n    if (k) goto mid;\n"
              "top: s = s * x;\nmid: s = s + 1;\n    if (++i < 3) goto top;\n    return s;\n}\n")
    fn = ado.from_c(source, opt=0)["f"]
    assert ez.autodiff(ez.Forward, fn, ez.Duplicated(1.5, 1.0), 1) == pytest.approx(3 * 1.5 ** 2 + 2 * 1.5 + 1)   # s = x^3 + x^2 + x + 1
    with pytest.raises(ado.DifferentiationError, match=r"irreducible control flow in @f.* at <c source>:\d+ enters a cycle"):
        ez.autodiff(ez.Reverse, fn, ez.Active(1.5), 1)
