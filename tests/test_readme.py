"""The README's code runs as written (the GPU line is dropped where no GPU is present)."""
import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _has_cuda() -> bool:
    try:
        from adoffload.runtime import get_device
        get_device("cuda")
        return True
    except Exception:  # noqa: BLE001 - any failure means no usable GPU
        return False


def test_first_kernel_block_runs_and_its_adjoint_is_right(tmp_path):
    block = _python_blocks()[0]
    if not _has_cuda():
        block = "\n".join(line for line in block.splitlines() if 'device="cuda"' not in line)
    path = tmp_path / "readme_first_kernel.py"     # kernels need a source file
    path.write_text(block)
    namespace = {"__name__": "readme_first_kernel"}
    exec(compile(block, str(path), "exec"), namespace)
    x, y, out = namespace["x"], namespace["y"], namespace["out"]
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    np.testing.assert_allclose(namespace["d_x"], 2.0)
    np.testing.assert_allclose(namespace["d_a"][0], x.astype(np.float64).sum(), rtol=1e-4)


def test_foreign_ir_block_runs(monkeypatch):
    monkeypatch.chdir(README.parent)             # the block names a fixture by relative path
    block = _python_blocks()[2]
    assert "ez.autodiff" in block
    namespace = {}
    exec(compile(block, "README-foreign", "exec"), namespace)
    ez, mod = namespace["ez"], namespace["mod"]
    d_r2, d_sigma, none = ez.autodiff(ez.Reverse, mod["lj"], ez.Active(1.2), ez.Active(1.0), ez.Const(1.0))
    assert none is None and np.isfinite(d_r2) and np.isfinite(d_sigma)


def test_block_kernel_block_runs_and_its_adjoint_is_right(tmp_path):
    block = _python_blocks()[3]
    assert "ado.sync_threads()" in block
    path = tmp_path / "readme_block_kernel.py"
    path.write_text(block)
    namespace = {"__name__": "readme_block_kernel"}
    exec(compile(block, str(path), "exec"), namespace)
    A, B, C = namespace["A"], namespace["B"], namespace["C"]
    np.testing.assert_allclose(C, A @ B, rtol=1e-5)
    np.testing.assert_allclose(namespace["dA"], np.ones_like(C) @ B.T, rtol=1e-5)
    np.testing.assert_allclose(namespace["dB"], A.T @ np.ones_like(C), rtol=1e-5)
