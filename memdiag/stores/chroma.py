"""Reading a Chroma store, never modifying it (docs/reference.md#stores, §10).

chromadb's ``PersistentClient`` writes to the directory it opens (even to list or query), turns a
missing or empty directory into a new store, adds its tables to any SQLite file named
``chroma.sqlite3`` and migrates old stores in place. So a directory is validated read-only first
(SQLite ``mode=ro``) and then opened from a temporary copy that is removed on close. A server
(``http://host:port``) is read through ``chromadb.HttpClient`` with telemetry off.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import sqlite3
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from memdiag.errors import StoreError, UnavailableError
from memdiag.stores.embeddings import embedding_function_name
from memdiag.stores.records import CollectionData, Hit, MemoryRecord
from memdiag.stores.vector_reader import VectorStoreReader

__all__ = [
    "ChromaStore",
    "CollectionData",
    "CollectionInfo",
    "Hit",
    "MemoryRecord",
    "open_chroma",
    "validate_store_dir",
]

if TYPE_CHECKING:  # numpy and chromadb are imported lazily: `memdiag --help` must stay instant
    import numpy as np

    from memdiag.stores.layouts import LayoutRead, ReadOptions

Progress = Callable[[int, int], None]

# Tables every Chroma store since 0.4 has; a SQLite file without them is not a Chroma store.
CHROMA_TABLES = frozenset({"collections", "segments", "embeddings", "embedding_metadata"})
# Above 32,766 rows with metadatas chromadb's get fails with "too many SQL variables".
MAX_PAGE = 30_000


@dataclass(frozen=True)
class CollectionInfo:
    """What a collection is: size, vector dimension, distance space, embedding function."""

    name: str
    count: int
    dimension: int | None
    space: str  # the space the index uses: legacy metadata wins, as Chroma's index does
    embedding_function: str | None  # persisted config name ("default", "openai", ...) or None
    metadata: dict[str, Any] = field(default_factory=dict)
    configured_space: str | None = None  # configuration_json hnsw/spann "space"
    legacy_space: str | None = None  # metadata["hnsw:space"]

    @property
    def space_disagreement(self) -> bool:
        """Configuration and legacy metadata name different distance spaces."""
        return (
            self.configured_space is not None
            and self.legacy_space is not None
            and self.configured_space != self.legacy_space
        )


def _failure(e: BaseException) -> bool:
    """An error to report as a StoreError: any Exception, and a panic in chromadb's Rust
    bindings (pyo3's PanicException derives from BaseException: a corrupt SQLite column
    panics instead of returning an error). KeyboardInterrupt and SystemExit pass through."""
    return isinstance(e, Exception) or type(e).__name__ == "PanicException"


@contextlib.contextmanager
def _native_stderr_muted() -> Iterator[None]:
    """Hold what native code writes to fd 2 while chromadb runs: a Rust panic prints its
    message and a backtrace there before it becomes the one-line StoreError we report."""
    import os
    import sys

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2: nothing to keep clean
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _is_connection_error(e: BaseException) -> bool:
    mod = type(e).__module__
    return isinstance(e, (ConnectionError, TimeoutError)) or mod.startswith(("httpx", "httpcore"))


def validate_store_dir(path: Path) -> Path:
    """Check, without writing anything, that ``path`` is a Chroma persistent directory.

    Returns the path of its ``chroma.sqlite3``; raises ``StoreError`` saying what is wrong.
    """
    from memdiag.fileio import is_dir, is_file, path_stat

    db = path / "chroma.sqlite3"
    # (a name the OS refuses, too long or a loop, is an InputError of one line: exit 2)
    if path_stat(path) is None:
        raise StoreError(f"not a Chroma store: {path} does not exist")
    if not is_dir(path):
        hint = " (pass the directory that holds it)" if path.name == "chroma.sqlite3" else ""
        raise StoreError(f"not a Chroma store: {path} is a file, not a directory{hint}")
    if not is_file(db):
        try:
            empty = not any(path.iterdir())
        except OSError as e:
            raise StoreError(f"cannot read {path}: {e.strerror or e}") from None
        from memdiag.stores.lancedb import lancedb_hint

        what = "is empty" if empty else lancedb_hint(path) or "has no chroma.sqlite3"
        raise StoreError(f"not a Chroma store: {path} {what}")
    uri = "file:" + urllib.parse.quote(str(db.resolve())) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise StoreError(f"cannot open {db} read-only: {e}") from None
    try:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.DatabaseError as e:
        raise StoreError(
            f"not a Chroma store: {db} is not a readable SQLite database ({e})"
        ) from None
    finally:
        con.close()
    missing = CHROMA_TABLES - {r[0] for r in rows}
    if missing:
        raise StoreError(
            f"not a Chroma store: {db} lacks Chroma's tables ({', '.join(sorted(missing))})"
        )
    return db


class ChromaStore(VectorStoreReader):
    """A read-only view of a Chroma store (use as a context manager; see ``open_chroma``)."""

    def __init__(
        self,
        spec: str,
        client: Any,
        tempdir: Path | None,
        kind: str,
        options: ReadOptions | None = None,
    ) -> None:
        from memdiag.stores.layouts import ReadOptions

        self.spec = spec
        self.kind = kind  # "directory" or "server"
        self.options = options or ReadOptions()  # tenant scope, --embedding-function
        self._client = client
        self._tempdir = tempdir
        self._collections: dict[str, Any] = {}
        self._memories: dict[str, LayoutRead] = {}
        self._functions: dict[str, tuple[Any | None, str]] = {}

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Release the client and delete the temporary copy."""
        client, self._client = self._client, None
        self._collections.clear()
        self._memories.clear()
        self._functions.clear()
        if client is not None:
            try:
                client.close()
            except BaseException as e:  # a panic while closing a corrupt copy
                if not _failure(e):
                    raise
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    def __enter__(self) -> ChromaStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- errors -----------------------------------------------------------------------------

    def _fail(self, what: str, e: BaseException) -> Exception:
        if self.kind == "server" and _is_connection_error(e):
            return UnavailableError(f"Chroma server {self.spec} unreachable: {_one_line(e)}")
        return StoreError(f"{what} in {self.spec}: {_one_line(e)}")

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        if self._client is None:
            raise StoreError(f"Chroma store {self.spec} is closed")
        try:
            with _native_stderr_muted():
                return fn()
        except (StoreError, UnavailableError):
            raise
        except BaseException as e:
            if not _failure(e):
                raise
            raise self._fail(what, e) from None

    # -- reading ----------------------------------------------------------------------------

    def collection_names(self) -> list[str]:
        """Names of all collections, sorted."""
        found = self._call("cannot list collections", self._client.list_collections)
        return sorted(c if isinstance(c, str) else c.name for c in found)

    def _collection(self, name: str) -> Any:
        if name not in self._collections:
            try:
                with _native_stderr_muted():
                    col = self._client.get_collection(name, embedding_function=None)
            except BaseException as e:
                if not _failure(e):
                    raise
                if type(e).__name__ == "NotFoundError" or "does not exist" in str(e):
                    names = ", ".join(self.collection_names()) or "none"
                    raise StoreError(
                        f"no collection {name!r} in {self.spec} (collections: {names})"
                    ) from None
                raise self._fail(f"cannot open collection {name!r}", e) from None
            self._collections[name] = col
        return self._collections[name]

    def collection_info(self, name: str) -> CollectionInfo:
        """Size, dimension, distance space and embedding function of one collection."""
        col = self._collection(name)
        count = int(self._call(f"cannot count {name!r}", col.count))
        config = (
            self._call(f"cannot read the configuration of {name!r}", lambda: col.configuration_json)
            or {}
        )
        if not isinstance(config, dict):  # a corrupt configuration_json_str
            config = {}
        metadata = dict(col.metadata) if isinstance(col.metadata, dict) else {}
        configured = None
        for index in ("hnsw", "spann"):
            section = config.get(index)
            if isinstance(section, dict) and section.get("space"):
                configured = str(section["space"])
                break
        legacy = metadata.get("hnsw:space")
        legacy = str(legacy) if legacy is not None else None
        dimension = getattr(getattr(col, "_model", None), "dimension", None)
        if dimension is None and count:
            first = self._call(
                f"cannot read {name!r}", lambda: col.get(limit=1, include=["embeddings"])
            )
            emb = first.get("embeddings")
            if emb is not None and len(emb):
                dimension = len(emb[0])
        return CollectionInfo(
            name=name,
            count=count,
            dimension=dimension,
            space=legacy or configured or "l2",
            embedding_function=embedding_function_name(config),
            metadata=metadata,
            configured_space=configured,
            legacy_space=legacy,
        )

    def read(
        self,
        name: str,
        include_embeddings: bool = True,
        page_size: int = 5000,
        progress: Progress | None = None,
    ) -> CollectionData:
        """Every record of ``name`` in columns, paged with limit/offset.

        Paging is required: chromadb fails above 32,766 rows when metadatas are requested.
        Embeddings land in one preallocated float32 matrix (chromadb returns float64 pages).
        """
        import numpy as np

        page_size = max(1, min(page_size, MAX_PAGE))
        col = self._collection(name)
        total = int(self._call(f"cannot count {name!r}", col.count))
        include = ["documents", "metadatas"] + (["embeddings"] if include_embeddings else [])
        ids: list[str] = []
        docs: list[str | None] = []
        metas: list[dict[str, Any]] = []
        matrix: np.ndarray | None = None
        extra: list[np.ndarray] = []  # pages beyond the count seen at the start (live server)
        offset = 0
        while True:
            page = self._call(
                f"cannot read collection {name!r} (corrupt or unreadable store?)",
                functools.partial(col.get, limit=page_size, offset=offset, include=include),
            )
            got = page["ids"]
            if not got:
                break
            n = len(got)
            ids.extend(got)
            docs.extend(page.get("documents") or [None] * n)
            metas.extend(dict(m) if m else {} for m in (page.get("metadatas") or [None] * n))
            if include_embeddings:
                emb = self._page_embeddings(name, page.get("embeddings"), n, matrix)
                if matrix is None:
                    matrix = np.empty((max(total, n), emb.shape[1]), dtype=np.float32)
                if offset + n <= matrix.shape[0]:
                    matrix[offset : offset + n] = emb
                else:
                    extra.append(emb)
            offset += n
            if progress is not None:
                progress(offset, max(total, offset))
            if n < page_size:
                break
        if include_embeddings:
            if matrix is None:
                matrix = np.zeros((0, 0), dtype=np.float32)
            elif extra:
                matrix = np.vstack([matrix, *extra])
            else:
                matrix = matrix[:offset]
        return CollectionData(name, ids, docs, metas, matrix if include_embeddings else None)

    def _page_embeddings(self, name: str, raw: Any, n: int, matrix: Any) -> np.ndarray:
        """One page of embeddings as an (n, dim) float32 array; StoreError when the store
        gives rows of no, ragged or changing dimension (a corrupt store, e.g. a NULL
        ``collections.dimension``)."""
        import numpy as np

        try:
            emb = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise StoreError(
                f"corrupt store {self.spec}: collection {name!r} has unreadable embeddings "
                f"({_one_line(e)[:120]})"
            ) from None
        dim = None if matrix is None else matrix.shape[1]
        if (
            emb.ndim != 2
            or emb.shape[0] != n
            or emb.shape[1] == 0
            or dim not in (None, emb.shape[1])
        ):
            raise StoreError(
                f"corrupt store {self.spec}: collection {name!r} has embeddings of shape "
                f"{tuple(emb.shape)} for {n} record(s) (is its dimension missing?)"
            )
        return emb

    def memories(
        self, name: str, page_size: int = 5000, progress: Progress | None = None
    ) -> LayoutRead:
        """``name`` read as its library wrote it (``memdiag.stores.layouts``), memoized.

        The text is in ``documents`` wherever the library kept it (mem0: metadata ``data``),
        the library's own metadata keys are removed, and the tenant scope is applied.
        """
        from memdiag.stores.layouts import read_layout

        if name not in self._memories:
            raw = self.read(name, True, page_size, progress)
            self._memories[name] = read_layout(raw, self.options.scope)
        return self._memories[name]

    def memory_collections(self) -> list[str]:
        """Collection names without the libraries' own bookkeeping (mem0's ``mem0migrations``)."""
        from memdiag.stores.layouts import BOOKKEEPING_COLLECTIONS

        return [n for n in self.collection_names() if n not in BOOKKEEPING_COLLECTIONS]

    def embedding_function(self, name: str) -> tuple[Any | None, str]:
        """The function that embeds queries for ``name``, or (None, why and what would fit).

        The persisted one when it runs offline; else the one named by ``--embedding-function``
        (checked against the stored dimension), or the one at hand that reproduces the stored
        vectors (``identify_model``). Memoized.
        """
        from memdiag.stores.embedding_names import for_store

        if name not in self._functions:  # identifying the model embeds records: once
            self._functions[name] = for_store(self, name)
        return self._functions[name]

    def query_embedding(self, name: str, vector: Any, k: int) -> list[Hit]:
        """Chroma's own nearest-neighbour query for one vector: its ranks and distances."""
        col = self._collection(name)
        count = int(self._call(f"cannot count {name!r}", col.count))
        if count == 0 or k <= 0:
            return []
        from memdiag.stores.layouts import own_metadata, record_text

        memories = self.memories(name)
        # a multi-tenant store is queried as its library queries it: one tenant at a time
        where = self.options.scope.where() if memories.scoped else None
        res = self._call(
            f"cannot query collection {name!r}",
            lambda: col.query(
                query_embeddings=[list(map(float, vector))],
                n_results=min(k, count),
                where=where,
                include=["documents", "metadatas", "distances"],
            ),
        )
        ids = res["ids"][0]
        dists = res["distances"][0]
        docs = (res.get("documents") or [[None] * len(ids)])[0]
        metas = (res.get("metadatas") or [[None] * len(ids)])[0]
        layout = memories.layout
        return [
            Hit(
                i,
                r,
                float(d),
                record_text(layout, doc, m or {}),
                own_metadata(layout, m or {}),
                name,
            )
            for r, (i, d, doc, m) in enumerate(zip(ids, dists, docs, metas, strict=True), 1)
        ]


def _open_server(spec: str) -> ChromaStore:
    import chromadb
    from chromadb.config import Settings

    url = urllib.parse.urlparse(spec)
    if not url.hostname:
        raise StoreError(f"cannot parse Chroma server URL {spec!r}; expected http://host:port")
    ssl = url.scheme == "https"
    port = url.port or (443 if ssl else 8000)
    try:
        client = chromadb.HttpClient(
            host=url.hostname,
            port=port,
            ssl=ssl,
            settings=Settings(anonymized_telemetry=False),
        )
        client.heartbeat()
    except BaseException as e:
        if not _failure(e):
            raise
        if _is_connection_error(e) or "Could not connect" in str(e):
            raise UnavailableError(f"Chroma server {spec} unreachable: {_one_line(e)}") from None
        raise StoreError(f"cannot use Chroma server {spec}: {_one_line(e)}") from None
    return ChromaStore(spec, client, None, "server")


def _open_directory(spec: str) -> ChromaStore:
    src = Path(spec).expanduser()
    validate_store_dir(src)
    tempdir = Path(tempfile.mkdtemp(prefix="memdiag-chroma-"))
    try:
        client = _client_on_copy(src, tempdir / "store")
    except BaseException:  # errors, and Ctrl-C or SIGTERM while copying: no copy left behind
        shutil.rmtree(tempdir, ignore_errors=True)
        raise
    return ChromaStore(str(src), client, tempdir, "directory")


def _client_on_copy(src: Path, copy: Path) -> Any:
    """A client on a fresh copy of the store directory ``src``."""
    try:
        shutil.copytree(src, copy)
    except (OSError, shutil.Error) as e:
        raise StoreError(f"cannot read Chroma store {src}: {_one_line(e)}") from None
    try:
        import chromadb
        from chromadb.config import Settings

        with _native_stderr_muted():
            return chromadb.PersistentClient(
                path=str(copy), settings=Settings(anonymized_telemetry=False, allow_reset=False)
            )
    except BaseException as e:
        if not _failure(e):
            raise
        raise StoreError(
            f"cannot open Chroma store {src} (corrupt or unsupported?): {_one_line(e)}"
        ) from None


def open_chroma(spec: str, options: ReadOptions | None = None) -> ChromaStore:
    """Open a Chroma store read-only: a persistent directory or ``http(s)://host:port``.

    A directory is validated without writing and then read from a temporary copy; the user's
    files are never modified. Raises ``StoreError`` (not a store, corrupt, unreadable) or
    ``UnavailableError`` (server unreachable).
    """
    store = (
        _open_server(spec) if spec.startswith(("http://", "https://")) else _open_directory(spec)
    )
    if options is not None:
        store.options = options
    return store
