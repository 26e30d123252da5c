"""CUDA and HIP device sources to LLVM IR text, with the ziglang wheel's clang and our header.

No CUDA toolkit or ROCm headers are used (``-nocudainc``/``-nogpuinc``): ``ado_cuda.h`` (package
data next to this file) supplies what kernels use. clang's errors come back as a
``ForeignCompileError`` carrying clang's message.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from ...errors import ForeignCompileError, ToolNotFoundError
from .diagnostics import explained

HEADER = Path(__file__).with_name("ado_cuda.h")
TIMEOUT_S = 120
# part of the clang-IR cache key: bumped when what is stored for the same source changes (2: every
# spelling of the temporary file's path in debug info is "<cuda source>"; 3: null pointers are kept,
# -fno-delete-null-pointer-checks, so that their accesses are checked instead of deleted as undefined)
CLANG_IR_FORMAT = 3


def clang_command() -> list[str]:
    """``python -m ziglang clang`` (the ziglang wheel brings clang with the NVPTX and AMDGPU backends)."""
    if importlib.util.find_spec("ziglang") is None:
        raise ToolNotFoundError("ado.from_cuda needs clang from the ziglang wheel: pip install ziglang "
                                "(or the AMD extra, pip install 'adoffload[amd]')")
    return [sys.executable, "-m", "ziglang", "clang"]


def device_flags(language: str, arch: str) -> list[str]:
    """clang's flags for device-only LLVM IR of ``language`` ("cuda" | "hip") for ``arch``."""
    if language == "cuda":
        return ["-x", "cuda", "--cuda-device-only", f"--cuda-gpu-arch={arch}", "-nocudainc", "-nocudalib",
                "-Wno-unknown-cuda-version"]
    return ["-x", "hip", "--cuda-device-only", f"--offload-arch={arch}", "-nogpuinc", "-nogpulib"]


def compile_to_llvm(source: str, *, language: str = "cuda", arch: str = "sm_90", options=()) -> str:
    """LLVM IR text of the device code of ``source`` (-O2, the header included first).

    ``options`` are extra clang flags (``-DN=256``, ``-I...``). The IR is cached under the
    compile cache's ``clang-ir`` folder, keyed by source, flags and header (not by clang's
    version: another clang's IR of the same source is as good)."""
    from ...codegen.cache import CompileCache, default_root
    cache = CompileCache(default_root() / "clang-ir", versioned=False)
    key = ["clang-ir", CLANG_IR_FORMAT, language, arch, list(options), HEADER.read_text(), source]
    hit = cache.get(key)
    if hit is not None:
        return hit.decode()
    text = _compile(source, language, arch, options)
    cache.put(key, text.encode())
    return text


def _compile(source: str, language: str, arch: str, options) -> str:
    with tempfile.TemporaryDirectory(prefix="adoffload-cuda-") as tmp:
        suffix = ".cu" if language == "cuda" else ".hip"
        path = Path(tmp) / f"kernel{suffix}"
        path.write_text(source)
        out = Path(tmp) / "kernel.ll"
        command = (clang_command() + device_flags(language, arch)
                   + ["-O2", "-S", "-emit-llvm", "-fno-exceptions", "-fno-delete-null-pointer-checks",
                      "-include", str(HEADER), *options, str(path), "-o", str(out)])
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ForeignCompileError(f"clang took more than {TIMEOUT_S} s on the {language} source") from None
        if done.returncode != 0:
            name = f"<{language} source>"
            message = explained(done.stderr.replace(str(path), name), name, HEADER)
            raise ForeignCompileError(f"clang could not compile the {language} source for {arch}:\n{message}")
        return _source_named(out.read_text(), path, language)


def _source_named(text: str, path: Path, language: str) -> str:
    """Debug info (``options=["-gline-tables-only"]``) names the temporary file: name it as clang's
    errors do. Some of its ``DIFile``s give the path relative to the temporary root (``filename:
    "adoffload-cuda-xyz/kernel.cu", directory: "/tmp"``: clang does so when the working directory is
    under that root too), so that spelling is replaced as well."""
    name = f"<{language} source>"
    return text.replace(str(path), name).replace(f"{path.parent.name}/{path.name}", name)
