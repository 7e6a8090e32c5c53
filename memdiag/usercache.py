"""memdiag's per-user cache directory, and files written into it safely.

The cache only ever holds things memdiag can rebuild (e.g. tiktoken ranks in a compact form), so
every reader falls back to rebuilding when the cache is missing, stale, corrupt or read-only.

Location, most specific first: ``$MEMDIAG_CACHE_DIR`` (an empty value disables the cache, as
tiktoken does with ``TIKTOKEN_CACHE_DIR``); ``$XDG_CACHE_HOME/memdiag``; else the platform's
user cache: ``~/Library/Caches/memdiag`` on macOS, ``%LOCALAPPDATA%\\memdiag\\Cache`` on
Windows, ``~/.cache/memdiag`` elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from memdiag.errors import InputError
from memdiag.fileio import atomic_write


def cache_dir() -> Path | None:
    """The user cache directory (read now, not at import), or None when disabled."""
    explicit = os.environ.get("MEMDIAG_CACHE_DIR")
    if explicit is not None:
        return Path(explicit) if explicit else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "memdiag"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "memdiag"
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        base = Path(local) if local else Path.home() / "AppData" / "Local"
        return base / "memdiag" / "Cache"
    return Path.home() / ".cache" / "memdiag"


def write_atomic(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` at once (:func:`memdiag.fileio.atomic_write`); False if the
    cache is unwritable.

    A reader never sees half a file, and two processes racing to build the same entry both
    succeed: the last rename wins with identical content.
    """
    try:
        with atomic_write(path, "wb") as f:
            f.write(data)
    except InputError:  # atomic_write reports every OSError (unwritable, full, ...) as one
        return False
    return True


_MAGIC = b"memdiag-cache/1\n"


def entry(kind: str, name: str) -> Path | None:
    """Where cache entry ``name`` of ``kind`` lives, or None when the cache is disabled.

    Entries are marshal data, whose format may change between Python versions: the name says
    which version wrote it.
    """
    root = cache_dir()
    if root is None:
        return None
    return root / kind / f"{name}-py{sys.version_info[0]}{sys.version_info[1]}.marshal"


def write_checked(path: Path, key: bytes, payload: bytes) -> bool:
    """Store ``payload`` for ``key`` (e.g. the hash of its source) with a hash of its own bytes."""
    digest = hashlib.sha256(payload).digest()
    header = _MAGIC + hashlib.sha256(key).digest() + digest
    return write_atomic(path, header + payload)


def read_checked(path: Path, key: bytes) -> memoryview | None:
    """The payload stored for ``key``, or None if missing, unreadable, stale or corrupt."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    start = len(_MAGIC) + 64
    if (
        len(data) <= start
        or not data.startswith(_MAGIC)
        or data[len(_MAGIC) : len(_MAGIC) + 32] != hashlib.sha256(key).digest()
        or data[len(_MAGIC) + 32 : start] != hashlib.sha256(memoryview(data)[start:]).digest()
    ):
        return None
    return memoryview(data)[start:]
