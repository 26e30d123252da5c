"""``python -m adoffload doctor``: what adoffload can use on this machine, and why not.

Each line is one probe: versions, LLVM targets, JAX devices, CUDA and HIP devices (or the
reason there are none), and the optional tools code generation needs. A probe that fails
reports its error instead of stopping the report.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import platform
import subprocess
import sys

TRIPLES = (("NVPTX", "nvptx64-nvidia-cuda"), ("AMDGPU", "amdgcn-amd-amdhsa"))


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _probe(function) -> str:
    try:
        return function()
    except Exception as exc:               # a report line, never a crash
        return f"unavailable: {type(exc).__name__}: {exc}"


def _llvm() -> str:
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    found = []
    for name, triple in TRIPLES:
        try:
            llvm.Target.from_triple(triple)
            found.append(f"{name} yes")
        except RuntimeError:
            found.append(f"{name} NO")
    version = ".".join(str(v) for v in llvm.llvm_version_info)
    return f"LLVM {version}; targets: {', '.join(found)}"


def _jax() -> str:
    import jax
    import jaxlib
    devices = ", ".join(f"{d.platform}:{d.id} ({d.device_kind})" for d in jax.devices())
    return f"jax {jax.__version__}, jaxlib {jaxlib.__version__}; devices: {devices}"


def _cuda_python() -> str:
    try:
        import cuda.bindings
    except ImportError:
        return "not installed (pip install 'adoffload[cuda]')"
    return f"cuda-bindings {cuda.bindings.__version__}"


def _gpu_devices(kind: str) -> list[str]:
    from ..errors import DeviceError
    from ..runtime import device_count, get_device
    if kind == "cuda":
        from ..runtime.cuda import cuda_device_count as count
    else:
        from ..runtime.hip import hip_device_count as count
    try:
        number = count()
    except DeviceError as exc:
        return [f"none: {exc}"]
    if number == 0:
        return ["none: the driver reports 0 devices"]
    lines = []
    for ordinal in range(device_count(kind)):
        def describe(ordinal=ordinal):
            props = get_device(f"{kind}:{ordinal}").properties()
            extra = ", ".join(f"{k}={_human(k, v)}" for k, v in props.items() if k != "name")
            return f"{kind}:{ordinal} {props['name']} ({extra})"
        lines.append(_probe(describe))
    return lines


def _human(key: str, value) -> str:
    if key == "total_memory":
        return f"{value / 2**30:.1f} GiB"
    if key == "compute_capability":
        return "{}.{}".format(*value)
    return str(value)


def _tool(finder: str, version_args: list[str] | None = None) -> str:
    from ..codegen.gpu import tools
    found = getattr(tools, finder)()
    if found is None:
        return "not found"
    command = [str(part) for part in (found if isinstance(found, list) else [found])]
    text = " ".join(command)
    if version_args is not None:
        run = subprocess.run(command + version_args, capture_output=True, text=True, timeout=60)
        lines = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
        if lines:
            text += f" ({lines[-1].strip()})"
    return text


def _host() -> str:
    from ..runtime import get_device
    return get_device("cpu").name


def report() -> str:
    rows: list[tuple[str, str]] = [
        ("python", f"{sys.version.split()[0]} ({platform.platform()})"),
        ("adoffload", _probe(lambda: importlib.import_module("adoffload").__version__)),
        ("numpy", _version("numpy")),
        ("llvmlite", f"{_version('llvmlite')}; {_probe(_llvm)}"),
        ("jax", _probe(_jax)),
        ("host device", _probe(_host)),
        ("cuda-python", _probe(_cuda_python)),
    ]
    rows += [("CUDA devices", line) for line in _gpu_devices("cuda")]
    rows += [("HIP devices", line) for line in _gpu_devices("hip")]
    rows += [
        ("ptxas", _probe(lambda: _tool("find_ptxas", ["--version"]))),
        ("libdevice", _probe(lambda: _tool("find_libdevice"))),
        ("ld.lld", _probe(lambda: _tool("find_lld", ["--version"]))),
        ("ROCm ocml", _probe(lambda: _tool("find_ocml")).replace("not found", "not found (our own AMDGPU device math is used)")),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main() -> int:
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
