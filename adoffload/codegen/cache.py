"""The on-disk compile cache: PTX text, HSACO bytes, optimized host IR, keyed by content.

An entry is ``header + payload``; the header holds a magic, the format version, the
entry's key digest, the payload length and its sha256, and is verified on every read. A
corrupt, truncated, misplaced or foreign-version entry is a miss (and is replaced by the
next ``put``), never an error and never unpickled: payloads are plain bytes. Entries are
written to a temp file and moved into place with ``os.replace`` (atomic, so concurrent
writers are safe); the folder is user-only (0700) and files are 0600.
"""
from __future__ import annotations

import functools
import hashlib
import os
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path

FORMAT_VERSION = 1
_MAGIC = b"ADOC"
_HEADER = struct.Struct("<4sI32sQ32s")     # magic, format version, key digest, payload length, payload sha256


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[str, ...]:
    """What every key includes: tool versions and a digest of the compiler's own source, so
    an entry made by another adoffload build (even an unreleased edit) is never reused."""
    import llvmlite
    from importlib.metadata import PackageNotFoundError, version
    try:
        ours = version("adoffload")
    except PackageNotFoundError:
        ours = "unknown"
    package = Path(__file__).resolve().parent.parent      # all of adoffload/, not only codegen/ (AD, front end)
    source = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        source.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return (f"adoffload={ours}", f"source={source.hexdigest()[:16]}", f"llvmlite={llvmlite.__version__}",
            f"format={FORMAT_VERSION}")


def default_root() -> Path:
    env = os.environ.get("ADOFFLOAD_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "adoffload"


def _as_bytes(part) -> bytes:
    if isinstance(part, bytes):
        return part
    return str(part).encode()


class CompileCache:
    """``get(key_parts) -> bytes | None`` and ``put(key_parts, data)`` on a user-only folder."""

    def __init__(self, root: str | os.PathLike | None = None, *, versioned: bool = True):
        """``versioned=False``: keys leave out adoffload's and llvmlite's versions, for entries that
        depend only on their key parts (an external compiler's output for a given input)."""
        self.root = Path(root) if root is not None else default_root()
        self.versioned = versioned
        self._usable: bool | None = None

    # -- keys ---------------------------------------------------------------------------------

    def key(self, key_parts: Sequence) -> bytes:
        """sha256 over the sha256 of each part and the tool versions (order matters)."""
        h = hashlib.sha256()
        for part in list(key_parts) + (list(_versions()) if self.versioned else [f"format={FORMAT_VERSION}"]):
            h.update(hashlib.sha256(_as_bytes(part)).digest())
        return h.digest()

    def path_for(self, key_parts: Sequence) -> Path:
        hexkey = self.key(key_parts).hex()
        return self.root / hexkey[:2] / f"{hexkey}.bin"

    # -- folder ---------------------------------------------------------------------------------

    def _ensure_root(self) -> bool:
        """Create the folder 0700; refuse (bypass the cache) if someone else owns it."""
        if self._usable is None:
            try:
                self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
                st = self.root.stat()
                if hasattr(os, "getuid") and st.st_uid != os.getuid():
                    self._usable = False
                else:
                    if st.st_mode & 0o077:
                        os.chmod(self.root, 0o700)
                    self._usable = True
            except OSError:
                self._usable = False
        return self._usable

    # -- entries ----------------------------------------------------------------------------------

    def get(self, key_parts: Sequence) -> bytes | None:
        if not self._ensure_root():
            return None
        key = self.key(key_parts)
        path = self.root / key.hex()[:2] / f"{key.hex()}.bin"
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        payload = self._verified_payload(blob, key)
        if payload is None:
            try:
                path.unlink()            # a bad entry: drop it so the next put replaces it
            except OSError:
                pass
        return payload

    @staticmethod
    def _verified_payload(blob: bytes, key: bytes) -> bytes | None:
        if len(blob) < _HEADER.size:
            return None
        magic, fmt, key_digest, length, digest = _HEADER.unpack_from(blob)
        payload = blob[_HEADER.size:]
        if magic != _MAGIC or fmt != FORMAT_VERSION or key_digest != key or length != len(payload):
            return None
        if hashlib.sha256(payload).digest() != digest:
            return None
        return payload

    def put(self, key_parts: Sequence, data: bytes) -> bool:
        """Store ``data``; returns False (and stores nothing) if the cache cannot be written."""
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"cache payloads are bytes, got {type(data).__name__}")
        if not self._ensure_root():
            return False
        key = self.key(key_parts)
        folder = self.root / key.hex()[:2]
        header = _HEADER.pack(_MAGIC, FORMAT_VERSION, key, len(data), hashlib.sha256(data).digest())
        tmp = None
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".bin")   # created 0600
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(data)
            os.replace(tmp, folder / f"{key.hex()}.bin")
            return True
        except OSError:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            return False
