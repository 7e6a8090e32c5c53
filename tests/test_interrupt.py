"""An interrupted audit (SIGTERM from a CI timeout or `kill`, Ctrl-C) cleans up and exits
promptly: no temporary store copy left behind, the user's store untouched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from memdiag.stores.audit.duplicates import Cancelled, NearDuplicateSearch, UnionFind
from memdiag.stores.records import CollectionData
from tests.test_stores import tree_digest


def _store(path: Path, n: int) -> None:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(str(path), settings=Settings(anonymized_telemetry=False))
    col = client.create_collection("memories", embedding_function=None)
    rng = np.random.default_rng(1)
    for s in range(0, n, 1000):
        k = min(n, s + 1000) - s
        col.add(
            ids=[f"r{i}" for i in range(s, s + k)],
            embeddings=rng.standard_normal((k, 384)).astype(np.float32),
            documents=[f"Note {i} about the trip." for i in range(s, s + k)],
        )
    client.close()


def test_sigterm_removes_the_temporary_copy_and_exits_143(tmp_path: Path) -> None:
    store, scratch = tmp_path / "store", tmp_path / "tmp"
    scratch.mkdir()
    _store(store, 3000)
    before = tree_digest(store)
    env = {**os.environ, "TMPDIR": str(scratch)}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from memdiag.cli import main; main()", "inspect-store",
         "--chroma", str(store)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    while not any(scratch.glob("memdiag-chroma-*")):  # the copy is made: the audit is under way
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert not list(scratch.iterdir())
    assert tree_digest(store) == before


def test_a_cancelled_near_duplicate_search_stops_without_finishing() -> None:
    rng = np.random.default_rng(0)
    n = 40_000  # seconds of search: far more than the moment cancel() takes
    data = CollectionData("m", [f"r{i}" for i in range(n)], [None] * n, [{}] * n,
                          rng.standard_normal((n, 384)).astype(np.float32))  # fmt: skip
    search = NearDuplicateSearch.start(data, UnionFind(n), [()] * n, 0.95, 2048, None)
    assert search is not None
    search.cancel()
    assert isinstance(search.pending.exception(timeout=120), Cancelled)
