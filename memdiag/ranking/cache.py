"""A content-addressed embedding cache under the user cache dir (docs/reference.md#performance).

Vectors are keyed by a hash of (model, text), so a message embedded in one run is free in the
next, whatever transcript it came from. One SQLite file per model: safe under concurrent runs
(`check --jobs`), read in batches, written once per batch. A cache that cannot be opened or
written (read-only home, full disk) is switched off for the run, never an error.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memdiag.usercache import cache_dir

if TYPE_CHECKING:
    import numpy as np

_SQL_VARS = 500  # keys per SELECT (SQLite's default limit on variables is 999)


def text_key(model: str, text: str) -> bytes:
    return hashlib.blake2b(f"{model}\0{text}".encode(), digest_size=16).digest()


class EmbeddingCache:
    """Vectors of one model, by content. ``get`` and ``put`` work on batches."""

    def __init__(self, model: str, folder: Path | None = None) -> None:
        self.model = model
        base = folder if folder is not None else cache_dir()
        self.path = (base or Path()) / "embeddings" / f"{_safe(model)}.sqlite"
        self.hits = 0
        self.misses = 0
        self.error: str | None = None
        self._db: sqlite3.Connection | None = None
        if base is None:
            self.error = "embedding cache off (MEMDIAG_CACHE_DIR is empty)"
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS vec (k BLOB PRIMARY KEY, v BLOB)")
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            self._off(exc)

    def _off(self, exc: Exception) -> None:
        self.error = f"embedding cache off ({self.path}: {exc})"
        if self._db is not None:
            self._db.close()
        self._db = None

    def get(self, texts: Sequence[str], dim: int | None = None) -> list[np.ndarray | None]:
        """The cached vector of each text, or None where it is not cached."""
        import numpy as np

        keys = [text_key(self.model, t) for t in texts]
        found: dict[bytes, bytes] = {}
        if self._db is not None:
            try:
                for i in range(0, len(keys), _SQL_VARS):
                    chunk = keys[i : i + _SQL_VARS]
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(f"SELECT k, v FROM vec WHERE k IN ({marks})", chunk)
                    found.update(rows)
            except sqlite3.Error as exc:
                self._off(exc)
        out: list[np.ndarray | None] = []
        for k in keys:
            blob = found.get(k)
            vec = None if blob is None else np.frombuffer(blob, dtype=np.float32)
            if vec is not None and dim is not None and vec.shape[0] != dim:
                vec = None
            out.append(vec)
        hits = sum(v is not None for v in out)
        self.hits += hits
        self.misses += len(out) - hits
        return out

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        if self._db is None or not len(texts):
            return
        import numpy as np

        rows = [
            (text_key(self.model, t), np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        try:
            self._db.executemany("INSERT OR IGNORE INTO vec VALUES (?, ?)", rows)
            self._db.commit()
        except sqlite3.Error as exc:
            self._off(exc)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
