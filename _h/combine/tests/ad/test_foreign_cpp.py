"""C++ through the wheel's clang++ (libc++) at -O0..-O3: std::vector, lambdas, templates.

The reader must take what clang++ emits (vtable GEPs with ``inrange``, ``llvm.assume`` operand
bundles); the host JIT compiles only what the called function reaches (a libc++ template
instantiation the .ll lacks, std::sort's, only stops the function that calls it) and takes
operator new/delete and the ``__cxa_*`` ABI from the system's C++ runtime. Derivatives are right
or refused with a DifferentiationError, never wrong."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import adoffload as ado
from adoffload import enzyme as ez
from adoffload.errors import CompilationError, DifferentiationError
from adoffload.testing import differential

pytestmark = pytest.mark.skipif(not differential.clang_available(), reason="the ziglang wheel (clang++) is not installed")

SOURCE = r"""
#include <vector>
#include <cmath>
#include <numeric>
#include <algorithm>
template <typename T> T sq(T a) { return a * a; }
extern "C" double vec_energy(int n, const double* x) {
    std::vector<double> buf(x, x + n);
    for (auto& b : buf) b = std::sin(b) * b;
    return std::accumulate(buf.begin(), buf.end(), 0.0, [](double a, double b) { return a + sq(b); });
}
extern "C" double sorted_weights(int n, const double* x) {
    std::vector<double> a(x, x + n);
    std::sort(a.begin(), a.end());
    double s = 0; for (int i = 0; i < n; i++) s += a[i] * (i + 1); return s;
}
"""


@pytest.fixture(scope="module", params=[0, 1, 2, 3], ids=lambda n: f"O{n}")
def cpp(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cpp")
    (folder / "k.cpp").write_text(SOURCE)
    cmd = [sys.executable, "-m", "ziglang", "c++", "-S", "-emit-llvm", f"-O{request.param}", "-fno-sanitize=all",
           "-w", str(folder / "k.cpp"), "-o", str(folder / "k.ll")]
    subprocess.run(cmd, check=True, capture_output=True)
    return request.param, ado.from_llvm((folder / "k.ll").read_text())


def test_std_vector_and_a_lambda(cpp):
    opt, module = cpp
    fn = module["vec_energy"]
    x = np.array([0.3, -0.8, 1.1, 0.45, -0.2, 0.9])
    assert fn(6, x) == pytest.approx(np.sum((np.sin(x) * x) ** 2), rel=1e-14)
    expected = 2 * np.sin(x) * x * (np.cos(x) * x + np.sin(x))
    dx = np.zeros_like(x)
    try:
        ez.autodiff(ez.Reverse, fn, 6, ez.Duplicated(x.copy(), dx))
    except DifferentiationError:
        assert opt == 0, "only -O0's unoptimized vector code is refused"
        return
    np.testing.assert_allclose(dx, expected, rtol=1e-12)
    v = np.linspace(-1.0, 1.0, 6)
    assert ez.autodiff(ez.Forward, fn, 6, ez.Duplicated(x.copy(), v)) == pytest.approx(float(expected @ v), rel=1e-12)


def test_a_function_calling_what_the_module_lacks_is_refused_by_name(cpp):
    _, module = cpp
    with pytest.raises(CompilationError, match="__sort"):
        module["sorted_weights"](3, np.array([3.0, 1.0, 2.0]))
