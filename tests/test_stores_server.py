"""The same audit, lookup and query over a Chroma server (``chroma run``) as in embedded mode."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from memdiag.config import AuditSettings
from memdiag.stores.audit import ChromaCollectionSummary, audit
from memdiag.stores.chroma import open_chroma
from memdiag.stores.facts_file import load_facts_file
from memdiag.stores.retrieval import find_in_store

from .test_stores import (
    COSINE,
    DIRTY_EXPECTED,
    FIXTURES,
    NOW,
    _model_dir_or_skip,
    build_store,
    planted,
    populate,
)

pytestmark = pytest.mark.server


def _chroma_executable() -> str | None:
    beside = Path(sys.executable).parent / "chroma"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("chroma")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A `chroma run` server holding the clean and dirty collections, and the same data in an
    embedded store. CI starts the server itself (MEMDIAG_TEST_CHROMA_URL); else we start one."""
    external = os.environ.get("MEMDIAG_TEST_CHROMA_URL")
    if external:
        yield _external_server(external, tmp_path_factory)
        return
    exe = _chroma_executable()
    if exe is None:
        pytest.skip(f"no `chroma` executable next to {sys.executable} or on PATH")
    model = _model_dir_or_skip()
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    path = tmp_path_factory.mktemp("chroma-server") / "store"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("ANONYMIZED_TELEMETRY", "False")
        build_store(
            path, {"clean": ("clean.jsonl", COSINE), "dirty": ("dirty.jsonl", COSINE)}, model
        )
    port = _free_port()
    log = (path.parent / "server.log").open("wb")
    env = {**os.environ, "HOME": str(home), "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen(
        [exe, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma server did not start; see {path.parent / 'server.log'}")
                time.sleep(0.2)
        yield url, path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _external_server(url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """Fill a running server (started by .ci/run) and build the embedded twin of its data."""
    import urllib.parse

    import chromadb
    from chromadb.config import Settings

    model = _model_dir_or_skip()
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    path = tmp_path_factory.mktemp("chroma-twin") / "store"
    collections = {"clean": ("clean.jsonl", COSINE), "dirty": ("dirty.jsonl", COSINE)}
    parsed = urllib.parse.urlparse(url)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("ANONYMIZED_TELEMETRY", "False")
        client = chromadb.HttpClient(
            host=parsed.hostname, port=parsed.port, settings=Settings(anonymized_telemetry=False)
        )
        for name in client.list_collections():  # the CI server is ours alone: start clean
            client.delete_collection(name if isinstance(name, str) else name.name)
        populate(client, collections, model)
        build_store(path, collections, model)
    return url, path


def test_server_audit_equals_embedded(chroma_server: tuple[str, Path]) -> None:
    url, path = chroma_server
    facts = load_facts_file(FIXTURES / "facts.json")
    with open_chroma(url) as store:
        assert store.collection_names() == ["clean", "dirty"]
        remote = audit(facts, store, "dirty", AuditSettings(), now=NOW)
        remote_clean = audit(facts, store, "clean", AuditSettings(), now=NOW)
    # The server owns the directory; an embedded read goes through memdiag's temporary copy.
    with open_chroma(str(path)) as store:
        local = audit(facts, store, "dirty", AuditSettings(), now=NOW)
    assert planted(remote) == planted(local) == DIRTY_EXPECTED
    assert [f.message for f in remote.findings] == [f.message for f in local.findings]
    assert remote.tiers == local.tiers
    assert remote_clean.findings == ()
    entry = next(s for s in remote.stores if isinstance(s, ChromaCollectionSummary))
    assert entry.mode == "server" and entry.location == url


def test_server_lookup_and_query_equal_embedded(chroma_server: tuple[str, Path]) -> None:
    url, path = chroma_server
    query = "what food allergies do I have"
    with open_chroma(url) as store:
        remote_stored = find_in_store(store, None, "allergic to peanuts")
        remote = store.query("dirty", query, 4)
    with open_chroma(str(path)) as store:
        local_stored = find_in_store(store, None, "allergic to peanuts")
        local = store.query("dirty", query, 4)
    assert [(r.collection, r.id) for r in remote_stored] == [
        (r.collection, r.id) for r in local_stored
    ]
    assert remote_stored[0].id == "d7"
    # d2 and d3 are planted exact duplicates: equal distances, so either may come first.
    assert [h.document for h in remote] == [h.document for h in local]
    assert remote[0].id == local[0].id == "d7"
    assert [h.distance for h in remote] == pytest.approx([h.distance for h in local], abs=1e-5)
