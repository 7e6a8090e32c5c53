"""Memory stores that are files, read as their libraries write them (docs/stores.md).

``--store PATH`` takes any of these; the layout is detected from the content, never the name:

- **mcp-memory**: the MCP reference memory server's knowledge graph
  (``@modelcontextprotocol/server-memory``): its JSONL file (one ``{"type": "entity", "name",
  "entityType", "observations"}`` or ``{"type": "relation", ...}`` per line) or the JSON of its
  ``read_graph`` tool (``{"entities": [...], "relations": [...]}``). Each observation is one
  memory; its entity's name is the memory's subject.
- **langgraph-items**: LangGraph store items dumped to JSON (``[item.dict() for item in
  store.search(...)]``: ``namespace``, ``key``, ``value``, ``created_at``, ``updated_at``); the
  text is ``value.content`` (or ``value.text`` / ``value.memory`` / ``value.data``, or a string
  value); the namespace's last part is the user.
- **langgraph-sqlite**: a LangGraph ``SqliteStore`` database (table ``store``: ``prefix``,
  ``key``, ``value``), read read-only.
- **agno**: Agno's user memories (``JsonDb`` memory table: ``memory``, ``topics``, ``user_id``,
  ``agent_id``, ``created_at``, ``updated_at``).
- **crewai-ltm**: CrewAI's long-term memory, ``long_term_memory_storage.db`` (table
  ``long_term_memories``: ``task_description``, ``metadata`` JSON with the ``suggestions`` the
  crew learned, ``datetime``, ``score``); each suggestion is one memory of its task's agent.

Files are opened read-only (SQLite ``mode=ro``, ``immutable``): their bytes never change. These
stores hold no vectors, so near-duplicates are skipped, saying why; diagnose checks retrieval as
each library retrieves (``memdiag.diagnosis.store_files``).
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdiag.errors import StoreError
from memdiag.fileio import json_loads, read_bytes
from memdiag.stores.layouts import Layout, LayoutRead, ReadOptions, read_layout
from memdiag.stores.records import CollectionData

MAX_BYTES = 256 * 1024 * 1024
SQLITE_MAGIC = b"SQLite format 3\x00"
TEXT_KEYS = ("content", "text", "memory", "data")
# the file names the libraries use, for a directory given to --store
KNOWN_FILES = (
    "memory.jsonl",
    "memory.json",
    "agno_memories.json",
    "long_term_memory_storage.db",
    "store.db",
)

Row = tuple[str, str, dict[str, Any]]  # id, text, metadata


@dataclass(frozen=True)
class StoreInfo:
    """What ``inspect-store`` says of a collection of a file store (as CollectionInfo does)."""

    name: str
    count: int
    dimension: int | None = None
    space: str = "none"
    embedding_function: str | None = None
    metadata: dict[str, Any] | None = None
    configured_space: str | None = None
    legacy_space: str | None = None
    space_disagreement: bool = False


class DocumentStore:
    """A memory store read from one file: one collection, its records, no vectors."""

    kind = "file"
    summary_type = "store"

    def __init__(self, path: Path, layout: Layout, rows: list[Row], options: ReadOptions) -> None:
        self.spec = str(path)
        self.path = path
        self.layout = layout
        self.options = options
        self.name = path.name
        self.label = f"{layout.name} store"
        ids = [r[0] for r in rows]
        data = CollectionData(self.name, ids, [r[1] for r in rows], [r[2] for r in rows], None)
        self._read = read_layout(data, options.scope, layout)

    def close(self) -> None:
        """Nothing stays open: the file was read whole."""

    def __enter__(self) -> DocumentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def collection_names(self) -> list[str]:
        return [self.name]

    def memory_collections(self) -> list[str]:
        return [self.name]

    def collection_info(self, name: str) -> StoreInfo:
        return StoreInfo(name, len(self._read.data.ids) + self._read.out_of_scope, metadata={})

    def memories(self, name: str, page_size: int = 0, progress: Any = None) -> LayoutRead:
        return self._read

    def cached_read(self, name: str) -> CollectionData:
        return self._read.data

    def problems(self) -> list[str]:
        return list(self._read.problems)

    def embedding_function(self, name: str) -> tuple[Any | None, str]:
        return None, (
            f"this {self.layout.name} store holds no vectors: no similarity search; diagnose "
            f"checks retrieval as its library does ({RETRIEVED_BY[self.layout.name]})"
        )

    def vector_index(self) -> str | None:
        """What says the store was searched by vector (a LangGraph index), or None.

        A SqliteStore created with ``index=`` keeps its embeddings in ``store_vectors``; items
        dumped from a search with a query carry a ``score``.
        """
        if self.layout.name == "langgraph-items":
            scored = sum(1 for m in self._read.data.metadatas if m.get("score") is not None)
            return f"{scored} items carry a search score" if scored else None
        if self.layout.name != "langgraph-sqlite":
            return None
        con = _connect(self.path)
        try:
            tables = con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if "store_vectors" not in {r[0] for r in tables}:
                return None
            (n,) = con.execute("SELECT count(*) FROM store_vectors").fetchone()
        except sqlite3.DatabaseError:
            return None
        finally:
            con.close()
        return f"{n} rows in store_vectors" if n else None


RETRIEVED_BY = {
    "mcp-memory": "the agent's read_graph or search_nodes call, whole entities",
    "langgraph-items": "store.search by namespace",
    "langgraph-sqlite": "store.search by namespace",
    "agno": "every memory of the user in the system prompt",
    "crewai-ltm": "the exact task description, latest runs",
}


def _fail(path: Path, why: str) -> StoreError:
    return StoreError(f"{path}: {why}")


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for k in TEXT_KEYS:
            v = value.get(k)
            if isinstance(v, str):
                return v
            if isinstance(v, dict):  # LangMem: {"kind": "Memory", "content": {"content": ...}}
                inner = _text(v)
                if inner is not None:
                    return inner
    return None


def _scalars(d: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(d, dict):
        return {}
    return {
        k: v
        for k, v in d.items()
        if k not in skip and (v is None or isinstance(v, (str, int, float, bool)))
    }


# --- JSON layouts ---------------------------------------------------------------------------


def _mcp_rows(path: Path, entities: list[Any], where: Callable[[int], str]) -> list[Row]:
    rows: list[Row] = []
    for n, e in enumerate(entities):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise _fail(path, f"{where(n)}: an entity needs a string 'name'")
        obs = e.get("observations", [])
        if not isinstance(obs, list):
            raise _fail(path, f"{where(n)}: 'observations' must be a list of strings")
        for k, text in enumerate(obs):
            if not isinstance(text, str):
                raise _fail(path, f"{where(n)}: observations[{k}] is not a string")
            meta = {"entity": e["name"], "entity_type": str(e.get("entityType", ""))}
            rows.append((f"{e['name']}#{k}", text, meta))
    return rows


def _langgraph_rows(path: Path, items: list[Any], where: Callable[[int], str]) -> list[Row]:
    rows: list[Row] = []
    for n, it in enumerate(items):
        ns = it.get("namespace") if isinstance(it, dict) else None
        if isinstance(ns, str):  # SqliteStore's prefix "memories.mia"
            ns = ns.split(".")
        if not isinstance(ns, list) or not isinstance(it.get("key"), str):
            raise _fail(path, f"{where(n)}: an item needs a 'namespace' list and a 'key'")
        text = _text(it.get("value"))
        if text is None:
            raise _fail(path, f"{where(n)}: value has no text ({'/'.join(TEXT_KEYS)})")
        meta = {
            **_scalars(it.get("value"), TEXT_KEYS),
            "namespace": "/".join(map(str, ns)),
            "created_at": it.get("created_at"),
            "updated_at": it.get("updated_at"),
        }
        if isinstance(it.get("score"), (int, float)):  # a search by query (an index) ranked it
            meta["score"] = it["score"]
        if len(ns) >= 2:
            meta["user_id"] = str(ns[-1])
        rows.append(("/".join(map(str, [*ns, it["key"]])), text, meta))
    return rows


def _agno_rows(path: Path, items: list[Any], where: Callable[[int], str]) -> list[Row]:
    rows: list[Row] = []
    for n, it in enumerate(items):
        if not isinstance(it, dict) or not isinstance(it.get("memory"), str):
            raise _fail(path, f"{where(n)}: an Agno memory needs a string 'memory'")
        meta = _scalars(it, ("memory", "memory_id", "input"))
        topics = it.get("topics")
        if isinstance(topics, list) and topics:
            meta["topics"] = ", ".join(map(str, topics))
        rows.append((str(it.get("memory_id") or f"memory-{n + 1}"), it["memory"], meta))
    return rows


def _jsonl(path: Path, text: str) -> tuple[Layout, list[Row]]:
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((n, json_loads(line)))
        except ValueError as e:
            raise _fail(path, f"line {n}: not JSON, nor one JSON value per line ({e})") from None
    if not records or not all(
        isinstance(r, dict) and r.get("type") in ("entity", "relation") for _n, r in records
    ):
        raise _fail(
            path,
            "JSONL records are not a known memory store (MCP memory graph lines have type "
            "entity/relation)",
        )
    entities = [r for _n, r in records if r["type"] == "entity"]
    at = [n for n, r in records if r["type"] == "entity"]
    rows = _mcp_rows(path, entities, lambda k: f"line {at[k]}")
    why = "JSONL of type entity/relation (MCP memory server's knowledge graph)"
    return Layout("mcp-memory", "observations", why), rows


def _detect_json(path: Path, text: str) -> tuple[Layout, list[Row]]:
    try:
        doc = json_loads(text)
    except ValueError:
        return _jsonl(path, text)
    if isinstance(doc, dict) and isinstance(doc.get("entities"), list):
        rows = _mcp_rows(path, doc["entities"], lambda k: f"entities[{k}]")
        return Layout(
            "mcp-memory", "observations", "{entities, relations} (MCP memory server's read_graph)"
        ), rows
    items = doc.get("items") if isinstance(doc, dict) and "items" in doc else doc
    if isinstance(items, list) and items and all(isinstance(i, dict) for i in items):
        first = items[0]
        if "namespace" in first and "key" in first and "value" in first:
            rows = _langgraph_rows(path, items, lambda k: f"[{k}]")
            return Layout(
                "langgraph-items",
                "value.content",
                "items with namespace/key/value (LangGraph store.search)",
            ), rows
        if "memory" in first and ({"memory_id", "topics", "user_id"} & set(first)):
            rows = _agno_rows(path, items, lambda k: f"[{k}]")
            return Layout(
                "agno", "memory", "records with memory/topics/user_id (Agno user memories)"
            ), rows
    hint = ""
    if isinstance(doc, dict) and all(isinstance(v, (str, int, float)) for v in doc.values()):
        hint = " (a {key: value} facts file? pass it with --facts-file)"
    raise _fail(
        path,
        "not a memory store memdiag knows: expected the MCP memory graph, "
        f"LangGraph store items or Agno memories{hint}",
    )


# --- SQLite layouts -------------------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
    # immutable=1: no lock, no journal, no -wal/-shm file beside it: the bytes stay as they are
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro&immutable=1"
    try:
        return sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise _fail(path, f"cannot open read-only: {e}") from None


def _sqlite(path: Path) -> tuple[Layout, list[Row]]:
    con = _connect(path)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "long_term_memories" in tables:
            return _crewai(path, con)
        if "store" in tables:
            cols = {r[1] for r in con.execute("PRAGMA table_info(store)")}
            if {"prefix", "key", "value"} <= cols:
                raw = con.execute(
                    "SELECT prefix, key, value, created_at, updated_at FROM store "
                    "ORDER BY created_at, rowid"
                ).fetchall()
                items = []
                for prefix, key, value, created, updated in raw:
                    if isinstance(value, bytes):  # LangGraph writes the JSON as a blob
                        value = value.decode("utf-8", "replace")
                    try:
                        v = json_loads(value) if isinstance(value, str) else value
                    except ValueError:
                        v = None
                    items.append(
                        {
                            "namespace": str(prefix).split("."),
                            "key": key,
                            "value": v,
                            "created_at": created,
                            "updated_at": updated,
                        }
                    )
                rows = _langgraph_rows(path, items, lambda k: f"store row {k + 1}")
                return Layout(
                    "langgraph-sqlite",
                    "value.content",
                    "SQLite table store(prefix, key, value) (LangGraph SqliteStore)",
                ), rows
        if {"collections", "embeddings"} <= tables:
            raise _fail(path, "a Chroma database: pass its directory with --chroma")
        shown = ", ".join(sorted(tables)) or "none"
        raise _fail(path, f"SQLite database with no memory table memdiag knows (tables: {shown})")
    except sqlite3.DatabaseError as e:
        raise _fail(path, f"not a readable SQLite database ({e})") from None
    finally:
        con.close()


def _crewai(path: Path, con: sqlite3.Connection) -> tuple[Layout, list[Row]]:
    raw = con.execute(
        "SELECT id, task_description, metadata, datetime, score FROM long_term_memories "
        "ORDER BY datetime, id"
    ).fetchall()
    rows: list[Row] = []
    for rid, task, meta_text, when, score in raw:
        try:
            meta = json_loads(meta_text) if isinstance(meta_text, str) else {}
        except ValueError:
            raise _fail(path, f"long_term_memories id {rid}: metadata is not JSON") from None
        meta = meta if isinstance(meta, dict) else {}
        base = {
            "task": str(task),
            "datetime": when,
            "score": score,
            **({"agent_id": str(meta["agent"])} if meta.get("agent") else {}),
        }
        suggestions = meta.get("suggestions")
        texts = (
            [s for s in suggestions if isinstance(s, str)] if isinstance(suggestions, list) else []
        )
        for k, text in enumerate(texts or [str(task)]):
            rows.append((f"ltm-{rid}#{k}", text, dict(base)))
    return Layout(
        "crewai-ltm",
        "metadata.suggestions",
        "SQLite table long_term_memories (CrewAI long-term memory)",
    ), rows


def open_store(spec: str, options: ReadOptions | None = None) -> Any:
    """Open a memory-store file (or a directory holding one of ``KNOWN_FILES``) read-only; a
    Qdrant local-mode folder is read by ``memdiag.stores.qdrant``, a LanceDB folder (CrewAI ≥
    1.10's memory) by ``memdiag.stores.lancedb`` (optional extras)."""
    options = options or ReadOptions()
    path = Path(spec).expanduser()
    if path.is_dir():
        from memdiag.stores.qdrant import is_qdrant_dir, open_qdrant

        if is_qdrant_dir(path):
            return open_qdrant(path, options)
        from memdiag.stores.lancedb import is_lancedb_dir, open_lancedb

        if is_lancedb_dir(path):
            return open_lancedb(path, options)
        found = [path / f for f in KNOWN_FILES if (path / f).is_file()]
        if not found and (path / "chroma.sqlite3").is_file():
            raise _fail(path, "a Chroma store: pass it with --chroma")
        if len(found) != 1:
            names = ", ".join(KNOWN_FILES)
            raise _fail(
                path,
                f"directory holds {'none' if not found else 'several'} of the "
                f"memory files memdiag knows ({names}): pass the file",
            )
        path = found[0]
    data = read_bytes(path, MAX_BYTES, "memory store")
    if data.startswith(SQLITE_MAGIC):
        layout, rows = _sqlite(path)
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise _fail(path, "neither a SQLite database nor UTF-8 JSON") from None
        layout, rows = _detect_json(path, text)
    return DocumentStore(path, layout, rows, options)
