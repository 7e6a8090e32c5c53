"""A LanceDB folder, read as CrewAI ≥ 1.10 writes its memory there (docs/stores.md).

CrewAI's unified ``Memory`` keeps its records in LanceDB (``LanceDBStorage``): a database folder
(``$CREWAI_STORAGE_DIR/memory``, else the platform data dir's ``memory``) holding the table
``memories`` as ``memories.lance/`` (``_versions/`` manifests, ``_transactions/``, ``data/``
fragments). One row per memory: ``content``, ``scope`` (a path; a crew's agents write under
``/crew/<crew>/agent/<role>``), ``categories_str`` and ``metadata_str`` (JSON),
``importance``, ``created_at``/``last_accessed`` (ISO), ``source`` (the provenance CrewAI's
private-record filter compares, "e.g. user ID"), ``private`` and ``vector``.

Reading needs lancedb (``pip install 'memdiag[lancedb]'``: an optional extra, the base install
does not grow). LanceDB reads a version's manifest and fragments and writes nothing when a table
is only opened and scanned (tests/test_store_lancedb.py hashes every file before and after), so
the folder is read in place, page by page. CrewAI's own storage is never opened: its
constructor compacts the table and builds an index, in the background.

Each row becomes a record: its text ``content``; metadata the JSON ``metadata_str`` (scalars)
with ``scope``, ``categories``, ``importance``, ``created_at`` (dates the record for staleness),
``last_accessed``, ``private``; ``source`` is the tenant's ``user_id`` and the role after
``/agent/`` in the scope its ``agent_id``. A table of another library is read from its text
column (``text``, ``content``, ``document``, ``page_content``) with its scalar columns as
metadata. Vectors are there: near-duplicates are searched and the model identified from them.
Without a vector index LanceDB ranks by L2 (squared) distance, which CrewAI turns into
``1 / (1 + distance)``; the space is that of the vector index when the table has one.
``diagnose`` searches a table as CrewAI's ``LanceDBStorage.search`` does (``table.search(vector)
.limit(k)``, the tenant's rows): ranks and distances are LanceDB's own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memdiag.errors import StoreError, UnavailableError
from memdiag.stores.layouts import TENANT_KEYS, Layout, LayoutRead, ReadOptions, read_layout
from memdiag.stores.records import CollectionData, Hit
from memdiag.stores.vector_reader import ModelFromVectors, VectorCollectionInfo

TABLE_SUFFIX = ".lance"
CREWAI_COLUMNS = frozenset({"id", "content", "scope", "categories_str", "metadata_str"})
TEXT_COLUMNS = ("content", "text", "document", "page_content")
VECTOR_COLUMNS = ("vector", "embedding")
# LanceDB's distance types, as memdiag (and Chroma) name spaces
SPACES = {"l2": "l2", "cosine": "cosine", "dot": "ip", "hamming": "hamming"}
DEFAULT_SPACE = "l2"  # what a LanceDB vector search uses when neither query nor index names one
PAGE = 1000


def is_table_dir(path: Path) -> bool:
    """A LanceDB table folder: ``NAME.lance`` with its ``_versions/`` manifests."""
    return path.name.endswith(TABLE_SUFFIX) and (path / "_versions").is_dir()


def is_lancedb_dir(path: Path) -> bool:
    """A LanceDB table folder, or a database folder holding at least one."""
    if is_table_dir(path):
        return True
    try:
        return any(is_table_dir(p) for p in path.iterdir() if p.is_dir())
    except OSError:
        return False


def lancedb_hint(path: Path) -> str | None:
    """What a folder given to ``--chroma`` is when it is a LanceDB store."""
    if is_lancedb_dir(path):
        return "is a LanceDB store (CrewAI's memory): pass it with --store"
    return None


def _why(e: BaseException) -> str:
    """The library's message on one line, without the Rust source places lance appends."""
    text = re.sub(r",? /\S+\.rs:\d+:\d+", "", " ".join(str(e).split()))
    return text[:200] or type(e).__name__


class LanceStore(ModelFromVectors):
    """A read-only view of a LanceDB folder (the audit's store interface): one collection per
    table."""

    kind = "directory"
    library = "LanceDB"
    summary_type = "lancedb"  # one table of a vector store, summarized as Chroma's are

    def __init__(self, path: Path, options: ReadOptions) -> None:
        self.spec = str(path)
        self.label = "lancedb store"
        self.options = options
        self._memories: dict[str, LayoutRead] = {}
        self._functions: dict[str, tuple[Any | None, str]] = {}
        try:
            import lancedb
        except ImportError:
            raise UnavailableError(
                f"{path} is a LanceDB store: reading it needs lancedb "
                "(pip install 'memdiag[lancedb]')"
            ) from None
        # a table folder given itself: its database is the folder above
        root, only = (path.parent, path.name) if is_table_dir(path) else (path, None)
        names = sorted(p.name.removesuffix(TABLE_SUFFIX) for p in root.iterdir() if is_table_dir(p))
        self._names = [n for n in names if only is None or n + TABLE_SUFFIX == only]
        for name in self._names:
            versions = root / (name + TABLE_SUFFIX) / "_versions"
            if not any(p.suffix == ".manifest" for p in versions.iterdir()):
                raise StoreError(
                    f"cannot read LanceDB store {path}: {versions} holds no .manifest "
                    "(a partial copy?)"
                )
        self._tables: dict[str, Any] = {}
        self._infos: dict[str, VectorCollectionInfo] = {}
        try:
            db = lancedb.connect(str(root))
            for name in self._names:
                table = db.open_table(name)
                self._tables[name] = table
                self._infos[name] = _info(name, table)
        except StoreError:
            raise
        except Exception as e:  # a missing manifest, a truncated fragment: one line
            raise StoreError(f"cannot read LanceDB store {path}: {_why(e)}") from None

    def close(self) -> None:
        """Nothing to release: LanceDB holds no lock on a folder it only reads."""
        self._tables = {}

    def __enter__(self) -> LanceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def collection_names(self) -> list[str]:
        return list(self._names)

    def memory_collections(self) -> list[str]:
        return list(self._names)

    def collection_info(self, name: str) -> VectorCollectionInfo:
        if name not in self._infos:
            names = ", ".join(self._names) or "none"
            raise StoreError(f"no table {name!r} in {self.spec} (tables: {names})")
        return self._infos[name]

    def memories(self, name: str, page_size: int = 0, progress: Any = None) -> LayoutRead:
        info = self.collection_info(name)
        if name not in self._memories:
            try:
                self._memories[name] = _read_table(
                    self._tables[name], info, self.options, page_size or PAGE, progress
                )
            except StoreError:
                raise
            except Exception as e:  # a fragment that cannot be decoded
                raise StoreError(
                    f"cannot read table {name!r} of LanceDB store {self.spec}: {_why(e)}"
                ) from None
        return self._memories[name]

    def query_embedding(self, name: str, vector: Any, k: int) -> list[Hit]:
        """LanceDB's own vector search (``table.search(vector).limit(k)``), as CrewAI's
        ``LanceDBStorage.search`` runs it: ranks from 1, ``_distance`` as LanceDB reports it
        (squared L2 without an index; CrewAI's score is ``1 / (1 + distance)``).

        A scoped read (``--user-id`` ...) ranks the whole table and keeps that tenant's rows,
        so the k nearest are the tenant's own.
        """
        from memdiag.stores.layouts import own_metadata, record_text

        info = self.collection_info(name)
        memories = self.memories(name)
        if info.count == 0 or k <= 0:
            return []
        table = self._tables[name]
        names = list(table.schema.names)
        column, _dim = _vector_column(table.schema)
        crewai = _crewai_layout(names)
        text_column = next((c for c in TEXT_COLUMNS if c in names), None)
        own = set(memories.data.ids)
        by_text: dict[str | None, list[str]] = {}
        if "id" not in names:  # rows without ids are told apart by their text, in order
            for i, d in zip(memories.data.ids, memories.data.documents, strict=True):
                by_text.setdefault(d, []).append(i)
        try:
            rows = (
                table.search([float(x) for x in vector], vector_column_name=column)
                .limit(info.count if memories.scoped else k)
                .to_list()
            )
        except Exception as e:  # a vector of another size: one line
            raise StoreError(f"cannot query LanceDB table {name!r}: {_why(e)}") from None
        hits: list[Hit] = []
        for row in rows:
            distance = float(row.pop("_distance", 0.0) or 0.0)
            row.pop(column, None)
            doc, meta = _crewai_row(row) if crewai else _plain_row(row, text_column)
            if "id" in names:
                rid = str(row["id"])
            else:
                taken = by_text.get(doc) or [""]
                rid = taken.pop(0)
            if rid not in own:  # another tenant's, or a row the read left out
                continue
            layout = memories.layout
            hits.append(
                Hit(
                    rid,
                    len(hits) + 1,
                    distance,
                    record_text(layout, doc, meta),
                    own_metadata(layout, meta),
                    name,
                )
            )
            if len(hits) >= k:
                break
        return hits


def _vector_column(schema: Any) -> tuple[str | None, int | None]:
    import pyarrow as pa

    for name in (*VECTOR_COLUMNS, *schema.names):
        if name not in schema.names:
            continue
        t = schema.field(name).type
        if pa.types.is_fixed_size_list(t) and pa.types.is_floating(t.value_type):
            return name, int(t.list_size)
    return None, None


def _info(name: str, table: Any) -> VectorCollectionInfo:
    column, dim = _vector_column(table.schema)
    space = DEFAULT_SPACE
    configured = None
    for idx in table.list_indices():  # a vector index fixes the distance its searches use
        if column in list(getattr(idx, "columns", [])):
            stats = table.index_stats(idx.name)
            kind = getattr(stats, "distance_type", None)
            if kind:
                configured = SPACES.get(str(kind).lower(), str(kind).lower())
                space = configured
    count = int(table.count_rows())
    return VectorCollectionInfo(
        name, count, dim, space, configured_space=configured, store="lancedb"
    )


def _crewai_layout(names: list[str]) -> bool:
    return set(names) >= CREWAI_COLUMNS


def _json_scalars(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if v is None or isinstance(v, (str, int, float, bool))}


def _categories(raw: Any) -> str | None:
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else []
    except ValueError:
        return None
    if isinstance(value, list) and value:
        return ", ".join(str(v) for v in value)
    return None


def _agent(scope: str) -> str | None:
    """The role after ``/agent/`` in a CrewAI scope (``/crew/travel-crew/agent/travel-agent``)."""
    parts = [p for p in scope.split("/") if p]
    for i, p in enumerate(parts[:-1]):
        if p == "agent":
            return parts[i + 1]
    return None


def _crewai_row(row: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    meta = _json_scalars(row.get("metadata_str"))
    scope = str(row.get("scope") or "/")
    meta.update(
        {
            "scope": scope,
            "importance": row.get("importance"),
            "created_at": row.get("created_at"),
            "last_accessed": row.get("last_accessed"),
            "private": bool(row.get("private")),
        }
    )
    cats = _categories(row.get("categories_str"))
    if cats:
        meta["categories"] = cats
    source = row.get("source")
    if isinstance(source, str) and source:
        meta["source"] = source
        meta["user_id"] = source
    agent = _agent(scope)
    if agent:
        meta["agent_id"] = agent
    text = row.get("content")
    return (text if isinstance(text, str) else None), meta


def _plain_row(row: dict[str, Any], text_column: str | None) -> tuple[str | None, dict[str, Any]]:
    meta: dict[str, Any] = {}
    for k, v in row.items():
        if k == text_column:
            continue
        if isinstance(v, dict):  # LangChain's and LlamaIndex's ``metadata`` struct
            meta.update(
                {a: b for a, b in v.items() if b is None or isinstance(b, (str, int, float, bool))}
            )
        elif v is None or isinstance(v, (str, int, float, bool)):
            meta[k] = v
    text = row.get(text_column) if text_column else None
    return (text if isinstance(text, str) else None), meta


def _read_table(
    table: Any, info: VectorCollectionInfo, options: ReadOptions, page: int, progress: Any
) -> LayoutRead:
    import numpy as np

    schema = table.schema
    names = list(schema.names)
    column, dim = _vector_column(schema)
    crewai = _crewai_layout(names)
    text_column = next((c for c in TEXT_COLUMNS if c in names), None)
    if not crewai and text_column is None:
        raise StoreError(
            f"LanceDB table {info.name!r} has no text column ({', '.join(TEXT_COLUMNS)}; "
            f"columns: {', '.join(names)})"
        )
    id_column = "id" if "id" in names else None
    ids: list[str] = []
    docs: list[str | None] = []
    metas: list[dict[str, Any]] = []
    blocks: list[Any] = []
    zero = 0
    scalar_columns = [c for c in names if c != column]
    # page by page: the vector column straight to float32 blocks, the rest as rows
    for batch in table.search().select(names).limit(None).to_batches(page):
        for row in batch.select(scalar_columns).to_pylist():
            text, meta = _crewai_row(row) if crewai else _plain_row(row, text_column)
            ids.append(str(row[id_column]) if id_column else f"row-{len(ids)}")
            docs.append(text)
            metas.append(meta)
        if column is not None and dim:
            vec = batch.column(column)
            if vec.null_count:
                rows = [v if v is not None else [0.0] * dim for v in vec.to_pylist()]
                block = np.asarray(rows, dtype=np.float32).reshape(-1, dim)
            else:
                flat = vec.flatten().to_numpy(zero_copy_only=False)
                block = np.asarray(flat, dtype=np.float32).reshape(-1, dim)
            zero += int(np.count_nonzero(~block.any(axis=1)))
            blocks.append(block)
        if progress is not None:
            progress(len(ids), info.count)
    emb = None
    if column is not None and dim:
        emb = np.concatenate(blocks) if blocks else np.zeros((0, dim), dtype=np.float32)
    present = tuple(k for k in TENANT_KEYS if any(k in m for m in metas))
    if crewai:
        layout = Layout(
            "crewai-memory",
            "content",
            "LanceDB table with content/scope/categories_str/metadata_str (CrewAI unified memory)",
            present,
        )
    else:
        layout = Layout("lancedb", text_column or "", f"LanceDB table, text in {text_column!r}")
    read = read_layout(CollectionData(info.name, ids, docs, metas, emb), options.scope, layout)
    if zero:
        line = (
            f"table {info.name!r}: {zero} of {len(ids)} records have an all-zero vector "
            "(CrewAI writes one when a record has no embedding): a search ranks them without "
            "regard to their text"
        )
        read = LayoutRead(
            read.layout,
            read.data,
            read.unreadable,
            (*read.problems, line),
            read.out_of_scope,
            read.tenants,
            read.scoped,
        )
    return read


def open_lancedb(path: Path, options: ReadOptions | None = None) -> LanceStore:
    """Open a LanceDB folder (a database, or one ``NAME.lance`` table) read-only, in place."""
    return LanceStore(path, options or ReadOptions())
