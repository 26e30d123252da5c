"""Compile-cache safety: user-only permissions, integrity-checked reads, no pickle anywhere."""
import ast
import hashlib
import os
import stat
from pathlib import Path

import numpy as np
import pytest

import adoffload
from adoffload import codegen
from adoffload.codegen.cache import _HEADER, CompileCache

from .cache_worker import poly

PACKAGE = Path(adoffload.__file__).resolve().parent
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_folders_are_0700_and_files_0600_even_with_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        store = CompileCache(tmp_path / "a" / "cache")
        assert store.put(["k"], b"payload")
        assert store.get(["k"]) == b"payload"
    finally:
        os.umask(old)
    entry = store.path_for(["k"])
    assert _mode(store.root) == 0o700 and _mode(entry.parent) == 0o700 and _mode(entry) == 0o600


def test_an_existing_open_folder_is_closed_to_group_and_others(tmp_path):
    root = tmp_path / "cache"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    CompileCache(root).put(["k"], b"x")
    assert _mode(root) == 0o700


def _host_entry_for_poly(store: CompileCache):
    """Compile poly's body for the host through ``store``; returns (program, its cache path)."""
    flat_types = [f.llvm_type for f in poly.signature.flat_params()]
    args = (poly.module_text(), poly.body_name, flat_types, poly.signature.grid_rank, "host")
    before = set(store.root.rglob("*.bin")) if store.root.exists() else set()
    program = codegen.compile_for_target(*args, cache=store)
    new = set(store.root.rglob("*.bin")) - before
    return args, program, new


def _run(program, a=1.5):
    """Call the compiled host entry for poly on 16 points."""
    from adoffload.language import status as abi_status
    from adoffload.codegen.slots import pack_slots
    from adoffload.kernels.launch import flat_values
    x = np.linspace(-1.0, 1.0, 16)
    out = np.zeros(16)
    values = [a, x, out]
    status = abi_status.new_record()
    flat = flat_values(poly.signature, values, [0, x.ctypes.data, out.ctypes.data])
    slots = pack_slots(flat, [f.llvm_type for f in poly.signature.flat_params()], (16,), status.ctypes.data)
    program.entry(program.entry_name)(slots.ctypes.data, 0, 16)
    return out, a * x * x + np.sin(x)


def test_a_tampered_payload_is_rejected_and_recompiled(tmp_path):
    store = CompileCache(tmp_path / "cache")
    args, program, new = _host_entry_for_poly(store)
    (entry,) = new
    blob = bytearray(entry.read_bytes())
    text = blob[_HEADER.size:].decode()
    assert "fmul" in text
    tampered = text.replace("fmul", "fadd", 1).encode()        # a different kernel, same header
    entry.write_bytes(bytes(blob[:_HEADER.size]) + tampered)
    program = codegen.compile_for_target(*args, cache=store)    # rejected -> recompiled
    got, want = _run(program)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert entry.read_bytes()[_HEADER.size:].decode() == text   # and the good entry written back


def test_an_entry_moved_to_another_key_is_rejected(tmp_path):
    """A well-formed entry under the wrong name (its header names another key) is a miss."""
    store = CompileCache(tmp_path / "cache")
    store.put(["a"], b"payload of a")
    wrong = store.path_for(["b"])
    wrong.parent.mkdir(mode=0o700, exist_ok=True)
    wrong.write_bytes(store.path_for(["a"]).read_bytes())
    assert store.get(["b"]) is None and not wrong.exists()          # dropped, so a put replaces it
    assert store.get(["a"]) == b"payload of a"


def test_every_cache_read_goes_through_the_integrity_check(tmp_path, monkeypatch):
    checked = []
    real = CompileCache._verified_payload

    def spy(blob, key):
        payload = real(blob, key)
        checked.append(payload is not None)
        return payload

    monkeypatch.setattr(CompileCache, "_verified_payload", staticmethod(spy))
    monkeypatch.setenv("ADOFFLOAD_CACHE_DIR", str(tmp_path / "cache"))
    kernel = adoffload.kernel(poly.pyfunc)
    x, out = np.linspace(0, 1, 8), np.zeros(8)
    kernel(1.0, x, out, grid=8)                          # cold: writes entries
    reads_cold = len(checked)
    again = adoffload.kernel(poly.pyfunc)                # a new kernel object reads them back
    again(1.0, x, out, grid=8)
    assert len(checked) > reads_cold and all(checked[reads_cold:])
    entries = list((tmp_path / "cache").rglob("*.bin"))
    assert len(entries) >= 1
    # get() returns nothing the check refuses (here: everything), so all is compiled afresh
    monkeypatch.setattr(CompileCache, "_verified_payload", staticmethod(lambda blob, key: None))
    third = adoffload.kernel(poly.pyfunc)                # everything refused -> compiled afresh, correct
    third(2.0, x, out, grid=8)
    np.testing.assert_allclose(out, 2.0 * x * x + np.sin(x), rtol=1e-14)


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__" and node.args \
                and isinstance(node.args[0], ast.Constant):
            yield str(node.args[0].value).split(".")[0]


def test_no_pickle_or_marshal_anywhere_in_the_package():
    offenders = []
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        bad = set(_imports(tree)) & FORBIDDEN_MODULES
        bad |= {"allow_pickle=True" for node in ast.walk(tree) if isinstance(node, ast.keyword)
                and node.arg == "allow_pickle" and getattr(node.value, "value", None) is True}
        bad |= {f"importlib.import_module({node.args[0].value!r})" for node in ast.walk(tree)
                if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
                and node.args and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value) in FORBIDDEN_MODULES}
        if bad:
            offenders.append(f"{path.relative_to(PACKAGE)}: {sorted(bad)}")
    assert not offenders, offenders


def test_the_no_pickle_scan_would_notice_one():
    tree = ast.parse("import os\nfrom pickle import loads\nimport marshal as m\n")
    assert set(_imports(tree)) & FORBIDDEN_MODULES == {"pickle", "marshal"}


def test_cache_payload_digest_is_over_the_bytes_that_load(tmp_path):
    store = CompileCache(tmp_path / "cache")
    store.put(["k"], b"abc")
    blob = store.path_for(["k"]).read_bytes()
    *_, length, digest = _HEADER.unpack_from(blob)
    assert length == 3 and digest == hashlib.sha256(b"abc").digest()
