"""SQLite files that memdiag reads and must never change (an agent's session or checkpoint
database): detection by the file's magic bytes, and a connection that writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from memdiag.errors import InputError
from memdiag.fileio import path_stat

if TYPE_CHECKING:
    import sqlite3

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: str | Path) -> bool:
    try:
        with open(path, "rb") as fp:
            return fp.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


@contextmanager
def connect_readonly(path: str) -> Iterator[sqlite3.Connection]:
    """A connection that can change nothing of the user's files.

    Agent databases are often in WAL mode, where even a read-only connection creates or updates
    `-wal` and `-shm` files. Without a `-wal` file the database file holds everything, so it is
    opened immutable; with one (the agent may still be running), the database and its WAL are
    copied to a temporary directory and the copy is read.
    """
    # imported here: detection reads only the magic bytes, and most inputs are not databases
    import shutil
    import sqlite3
    import tempfile

    wal = Path(path + "-wal")
    with tempfile.TemporaryDirectory(prefix="memdiag-") as tmp:
        if path_stat(wal) is not None:  # a name the OS refuses is an InputError, not a crash
            target = Path(tmp) / "copy.db"
            shutil.copyfile(path, target)
            shutil.copyfile(wal, Path(tmp) / "copy.db-wal")
            uri = target.as_uri() + "?mode=ro"
        else:
            uri = Path(path).resolve().as_uri() + "?immutable=1"
        try:
            conn = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open SQLite file: {exc}", path=path) from None
        try:
            yield conn
        finally:
            conn.close()
