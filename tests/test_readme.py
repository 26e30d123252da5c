"""Every code block of the README runs as written, with its values checked (issue 14, items 8
and 12). Without a GPU the lines that name ``device="cuda"`` are left out, as the README says."""
from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S)


def _has_cuda() -> bool:
    try:
        from adoffload.runtime import get_device
        get_device("cuda")
        return True
    except Exception:  # noqa: BLE001 - any failure means no usable GPU
        return False


def _run(block: str, path: Path, namespace: dict) -> dict:
    if not _has_cuda():
        block = "\n".join(line for line in block.splitlines() if 'device="cuda"' not in line)
    path.write_text(block)                   # kernels need a source file
    exec(compile(block, str(path), "exec"), namespace)
    return namespace


def test_every_python_block_is_checked_here():
    blocks = _blocks("python")
    assert len(blocks) == 5, "a README python block was added or removed: check it in this file"
    assert "@ado.kernel" in blocks[0] and "jax_kernel" in blocks[1] and "ez.autodiff" in blocks[2]
    assert "ado.from_c" in blocks[3] and "ado.sync_threads()" in blocks[4]


@pytest.fixture(scope="module")
def first_kernel(tmp_path_factory):
    return _run(_blocks("python")[0], tmp_path_factory.mktemp("readme") / "readme_first_kernel.py",
                {"__name__": "readme_first_kernel"})


def test_first_kernel_block_runs_and_its_adjoint_is_right(first_kernel):
    x, y, out = first_kernel["x"], first_kernel["y"], first_kernel["out"]
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    np.testing.assert_allclose(first_kernel["d_x"], 2.0)
    np.testing.assert_allclose(first_kernel["d_a"][0], x.astype(np.float64).sum(), rtol=1e-4)
    np.testing.assert_array_equal(first_kernel["d_out"], 1.0)         # the seed is kept


def test_jax_block_runs_after_the_first_and_its_values_are_right(first_kernel, tmp_path):
    jax = pytest.importorskip("jax")
    ns = _run(_blocks("python")[1], tmp_path / "readme_jax.py", dict(first_kernel))
    x, y, xs, ys = (np.asarray(ns[k]) for k in ("x", "y", "xs", "ys"))
    np.testing.assert_allclose(ns["d_a"], x.astype(np.float64).sum(), rtol=1e-5)
    np.testing.assert_allclose(ns["d_x"], 2.0)
    assert ns["outs"].shape == xs.shape == (3, 1000)
    np.testing.assert_allclose(ns["outs"], 2.0 * xs + ys, rtol=1e-6)
    assert isinstance(ns["outs"], jax.Array)


def test_foreign_ir_block_gives_the_derivatives_of_lj(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)                      # the block names a fixture relative to the repository root
    ns = _run(_blocks("python")[2], tmp_path / "readme_foreign.py", {})
    r2, sigma, epsilon = 1.2, 1.0, 1.0
    s6 = (sigma * sigma / r2) ** 3
    # E = 4 eps (s6^2 - s6), s6 = sigma^6 / r2^3
    d_r2 = 4 * epsilon * (2 * s6 - 1) * s6 * (-3 / r2)
    d_sigma = 4 * epsilon * (2 * s6 - 1) * s6 * (6 / sigma)
    assert ns["d_r2"] == pytest.approx(d_r2, rel=1e-12)
    assert ns["d_sigma"] == pytest.approx(d_sigma, rel=1e-12)


@pytest.mark.skipif(importlib.util.find_spec("ziglang") is None,
                    reason="ado.from_c compiles with the ziglang wheel's clang, which the install command brings")
def test_from_c_block_gives_the_derivatives_of_sin_x_y(tmp_path):
    ns = _run(_blocks("python")[3], tmp_path / "readme_from_c.py", {})
    assert ns["mod"]["f"](1.0, 2.0) == pytest.approx(2.0 * np.sin(1.0), rel=1e-15)
    assert ns["d_x"] == pytest.approx(2.0 * np.cos(1.0), rel=1e-14)
    assert ns["d_y"] == pytest.approx(np.sin(1.0), rel=1e-14)


def _bash_lines() -> list[str]:
    lines = []
    for block in _blocks("bash"):
        lines += [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    return lines


def test_readme_test_command_prints_a_pass_fail_summary(tmp_path):
    """``pytest`` as the README writes it, with the project's settings (pyproject.toml), ends
    with 'N passed'; so does ``pytest -q`` (the briefs' habit; -q in addopts made it -qq)."""
    command = next(line for line in _bash_lines() if line.split()[0] == "pytest")
    tiny = tmp_path / "test_tiny.py"
    tiny.write_text("def test_one():\n    assert True\n")
    for extra in ([], ["-q"]):
        result = subprocess.run([sys.executable, "-m", "pytest", *shlex.split(command)[1:], *extra,
                                 "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-p", "no:cacheprovider",
                                 str(tiny)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        assert re.search(r"\b1 passed\b", result.stdout.strip().splitlines()[-1]), (extra, result.stdout)


def test_example_and_benchmark_commands_name_real_scripts_and_options():
    """The bash blocks' example lines parse with the scripts' own argument parsers (the examples
    themselves run in tests/chemistry/test_examples.py at small sizes)."""
    import importlib.util
    lines = [line for line in _bash_lines() if line.startswith("python ")]
    assert any("lj_clusters.py" in line for line in lines)
    for line in lines:
        words = shlex.split(line)[1:]
        script = ROOT / words[0]
        assert script.is_file(), line
        if "examples" not in script.parts:
            continue
        sys.path.insert(0, str(script.parent))
        try:
            spec = importlib.util.spec_from_file_location(f"readme_{script.stem}", script)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            module.parse(words[1:])
        finally:
            sys.path.remove(str(script.parent))


def test_block_kernel_block_runs_and_its_adjoint_is_right(tmp_path):
    block = _blocks("python")[4]
    assert "ado.sync_threads()" in block
    path = tmp_path / "readme_block_kernel.py"
    path.write_text(block)
    namespace = {"__name__": "readme_block_kernel"}
    exec(compile(block, str(path), "exec"), namespace)
    A, B, C = namespace["A"], namespace["B"], namespace["C"]
    np.testing.assert_allclose(C, A @ B, rtol=1e-5)
    np.testing.assert_allclose(namespace["dA"], np.ones_like(C) @ B.T, rtol=1e-5)
    np.testing.assert_allclose(namespace["dB"], A.T @ np.ones_like(C), rtol=1e-5)
