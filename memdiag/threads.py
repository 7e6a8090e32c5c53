"""The threads of this process as the operating system counts them.

Not ``threading.active_count()``: chromadb's and onnxruntime's native threads are invisible to
it. Two places need the real count: `check --jobs` forks workers only from a single-threaded
parent (a child forked while another thread holds a lock hangs on it), and the CLI skips the
interpreter's teardown at exit only when no other thread could still be running.

Two libraries start idle worker threads as they are imported, threads that only ever compute
for a caller and never write anything: numpy (OpenBLAS's pool) and onnxruntime. The CLI
watches those two imports (:func:`watch_pools`) and keeps the ids of the threads each one
started, so that a run that used the embedding model can still end without the teardown.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

# packages whose import starts worker threads that stay idle between the caller's calls
POOL_PACKAGES = frozenset({"numpy", "onnxruntime"})
_pools: set[str] = set()  # ids (/proc/self/task) of the threads those imports started


def os_threads() -> int | None:
    """Threads of this process as Linux counts them (None elsewhere, or when unreadable)."""
    tids = _tids()
    return None if tids is None else len(tids)


def other_threads() -> int | None:
    """Threads but this one and the idle pools of :data:`POOL_PACKAGES` (None: not known)."""
    tids = _tids()
    return None if tids is None else len(tids - _pools) - 1


def _tids() -> set[str] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return None


class _Watched:
    """A package's loader that notes the threads its module's execution started."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        before = _tids()
        try:
            self._loader.exec_module(module)
        finally:
            after = _tids()
            if before is not None and after is not None:
                _pools.update(after - before)

    def __getattr__(self, name: str) -> Any:  # resources, is_package, get_data...
        return getattr(self._loader, name)


class _PoolWatch:
    """A meta path finder that hands out :class:`_Watched` loaders for :data:`POOL_PACKAGES`."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name not in POOL_PACKAGES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Watched(spec.loader)  # type: ignore[assignment]
                return spec
        return None


def watch_pools() -> None:
    """Note the threads numpy's and onnxruntime's imports start (once; a no-op if either is
    already imported, whose threads then count as any others)."""
    if sys.platform.startswith("linux") and not any(
        isinstance(f, _PoolWatch) for f in sys.meta_path
    ):
        sys.meta_path.insert(0, _PoolWatch())
