"""Fuzz the Chroma reader on corrupted copies of a real store.

The seed store is written by real chromadb (two collections, explicit 384-d vectors, so no
embedding model is needed). Each example corrupts a copy: a value in one of its SQLite tables
(NULL, wrong type, garbage; ``collections.dimension`` NULL among them), deleted rows, a dropped
table, or flipped, cut or removed bytes in the SQLite file and the HNSW segment files. memdiag
runs in a fresh interpreter (a crash in native code must not take pytest down) and must end with
exit 0, 1 or 2, one clean error line, and the corrupted copy byte-identical (never modified).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.harness import FIXTURES, fuzz_settings, run_process

N = (3, 150)


def _build_seed(path: Path) -> None:
    import chromadb
    import numpy as np
    from chromadb.config import Settings

    rng = np.random.default_rng(15)
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    for name in ("clean", "dirty"):
        rows = [
            json.loads(ln)
            for ln in (FIXTURES / "memories" / f"{name}.jsonl").read_text("utf-8").splitlines()
            if ln.strip()
        ]
        col = client.create_collection(
            name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )
        col.add(
            ids=[r["id"] for r in rows],
            documents=[r["document"] for r in rows],
            metadatas=[r["metadata"] for r in rows],
            embeddings=rng.normal(size=(len(rows), 384)).astype("float32").tolist(),
        )
    client.close()


@pytest.fixture(scope="module")
def seed_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    path = tmp_path_factory.mktemp("fuzz-chroma") / "store"
    with pytest.MonkeyPatch.context() as mp:  # module scope: HOME isolation by hand
        mp.setenv("HOME", str(home))
        mp.setenv("ANONYMIZED_TELEMETRY", "False")
        _build_seed(path)
    yield path


def _schema(db: Path) -> dict[str, list[str]]:
    con = sqlite3.connect(db)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
            for t in tables
            if not t.startswith("sqlite_")
        }
    finally:
        con.close()


GARBAGE: list[Any] = [None, "", -1, 0, 2**62, "garbage", b"\x00\xff", 1.5, "[bold", "{}", "{"]


@st.composite
def corruption(draw: st.DrawFn, schema: dict[str, list[str]], files: list[str]) -> tuple[Any, ...]:
    kind = draw(st.sampled_from(["value", "value", "value", "delete", "drop", "bytes", "remove"]))
    if kind in ("value", "delete", "drop"):
        table = draw(st.sampled_from(sorted(schema)))
        if kind == "value":
            column = draw(st.sampled_from(schema[table]))
            return ("value", table, column, draw(st.sampled_from(GARBAGE)), draw(st.booleans()))
        return (kind, table)
    if kind == "bytes":
        name = draw(st.sampled_from(files))
        op = draw(st.sampled_from(["flip", "truncate", "zero"]))
        return ("bytes", name, op, draw(st.floats(0, 1)), draw(st.integers(1, 4096)))
    return ("remove", draw(st.sampled_from(files)))


def _apply(store: Path, c: tuple[Any, ...]) -> None:
    if c[0] in ("value", "delete", "drop"):
        con = sqlite3.connect(store / "chroma.sqlite3")
        try:
            if c[0] == "value":
                _, table, column, value, all_rows = c
                where = "" if all_rows else f' WHERE rowid = (SELECT min(rowid) FROM "{table}")'
                con.execute(f'UPDATE "{table}" SET "{column}" = ?{where}', (value,))
            elif c[0] == "delete":
                con.execute(f'DELETE FROM "{c[1]}"')
            else:
                con.execute(f'DROP TABLE "{c[1]}"')
            con.commit()
        except sqlite3.DatabaseError:
            pass  # a constraint refused it: the copy stays as it was, still a valid example
        finally:
            con.close()
    elif c[0] == "bytes":
        _, name, op, where, size = c
        f = store / name
        data = f.read_bytes()
        at = int(where * len(data))
        if op == "flip":
            data = data[:at] + bytes(b ^ 0xFF for b in data[at : at + size]) + data[at + size :]
        elif op == "truncate":
            data = data[:at]
        else:
            data = data[:at] + b"\x00" * size + data[at + size :]
        f.write_bytes(data)
    else:
        (store / c[1]).unlink()


def test_fuzz_chroma_reader(seed_store: Path) -> None:
    schema = _schema(seed_store / "chroma.sqlite3")
    files = sorted(str(p.relative_to(seed_store)) for p in seed_store.rglob("*") if p.is_file())

    @fuzz_settings(*N)
    # found by this target: a TEXT version made chromadb's Rust bindings panic (a
    # BaseException, once a traceback); a NULL dimension made the reader index a 1-d array
    @example(changes=[("value", "migrations", "version", "", False)], collection=None)
    @example(changes=[("value", "collections", "dimension", None, True)], collection="clean")
    @given(
        changes=st.lists(corruption(schema, files), min_size=1, max_size=2),
        collection=st.sampled_from([None, "clean", "dirty"]),
    )
    def run(changes: list[tuple[Any, ...]], collection: str | None) -> None:
        folder = Path(tempfile.mkdtemp(prefix="memdiag-fuzz-chroma-"))
        try:
            shutil.copytree(seed_store, folder / "store")
            for c in changes:
                if c[0] in ("remove", "bytes") and not (folder / "store" / c[1]).exists():
                    continue  # removed by the change before
                _apply(folder / "store", c)
            argv = ["inspect-store", "--chroma", "store", "--format", "json"]
            argv += ["--collection", collection] if collection else []
            run_process("chroma", argv, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    run()
