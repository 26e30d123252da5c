"""Kernels defined in files of their own, for tests: the front end reads a kernel's source from its file."""
import importlib.util


def load_module(source: str, tmp_path, name="k"):
    """The module of ``source`` (prefixed with ``import adoffload as ado``), written under ``tmp_path``."""
    path = tmp_path / f"{name}_{abs(hash(source))}.py"
    path.write_text("import adoffload as ado\n" + source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
