"""Long-term stores: facts file, Chroma reading (read-only), audit, retrieval
(docs/reference.md#stores, §7).

Stores are built at test time from the readable fixtures in fixtures/memories/ with real chromadb
and Chroma's real default embedding model (offline copy); nothing of chromadb is mocked.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memdiag.config import AuditSettings
from memdiag.errors import StoreError, UnavailableError
from memdiag.stores.audit import (
    KINDS,
    SEVERITY,
    AuditReport,
    ChromaCollectionSummary,
    FactsFileSummary,
    audit,
)
from memdiag.stores.chroma import open_chroma
from memdiag.stores.embeddings import resolve_embedding_function
from memdiag.stores.facts_file import load_facts_file
from memdiag.stores.retrieval import find_in_store, locate
from memdiag.stores.tiers import TIERS, assign_tier
from memdiag.text import as_first_person, normalize_key, same_value
from tests.conftest import NO_MODEL, onnx_model_dir

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
MEMORIES = FIXTURES / "memories"
NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


# -- helpers ------------------------------------------------------------------------------------


def tree_digest(path: Path) -> dict[str, str]:
    """sha256 of every file below ``path`` (and the set of names: nothing added or removed)."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    } | {str(p.relative_to(path)) + "/": "dir" for p in path.rglob("*") if p.is_dir()}


def load_jsonl(name: str) -> list[dict[str, Any]]:
    lines = (MEMORIES / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def planted(report: AuditReport, collection: str | None = None) -> set[tuple[str, frozenset[str]]]:
    return {
        (f.kind, frozenset(f.ids))
        for f in report.findings
        if collection is None or f.collection in (collection, None)
    }


def _model_dir_or_skip() -> Path:
    # conftest's `model_dir` fixture is function-scoped; module fixtures look the same way.
    d = onnx_model_dir()
    if d is None:
        pytest.skip(NO_MODEL)
    return d


def build_store(
    path: Path, collections: dict[str, tuple[str, dict[str, Any]]], model: Path
) -> None:
    """Create a persistent store: {collection: (fixture file, configuration)}."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    populate(client, collections, model)
    client.close()


def populate(client: Any, collections: dict[str, tuple[str, dict[str, Any]]], model: Path) -> None:
    """Create the collections in any Chroma client (embedded or HTTP), embedded with MiniLM."""
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction, ONNXMiniLM_L6_V2

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ONNXMiniLM_L6_V2, "DOWNLOAD_PATH", model)
        for name, (fixture, config) in collections.items():
            col = client.create_collection(
                name, embedding_function=DefaultEmbeddingFunction(), configuration=config
            )
            rows = load_jsonl(fixture)
            col.add(
                ids=[r["id"] for r in rows],
                documents=[r["document"] for r in rows],
                metadatas=[r["metadata"] for r in rows],
            )


COSINE = {"hnsw": {"space": "cosine"}}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One store with clean, dirty (cosine) and an L2 collection, built once per module."""
    model = _model_dir_or_skip()
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    path = tmp_path_factory.mktemp("chroma") / "store"
    with pytest.MonkeyPatch.context() as mp:  # module scope: HOME isolation by hand
        mp.setenv("HOME", str(home))
        mp.setenv("ANONYMIZED_TELEMETRY", "False")
        build_store(
            path,
            {
                "clean": ("clean.jsonl", COSINE),
                "dirty": ("dirty.jsonl", COSINE),
                "l2_space": ("clean.jsonl", {"hnsw": {"space": "l2"}}),
            },
            model,
        )
    yield path


# The planted problems of fixtures/memories/dirty.jsonl, audited with fixtures/facts.json.
DIRTY_EXPECTED = {
    ("duplicate", frozenset({"d2", "d3"})),
    ("duplicate", frozenset({"d10", "d12"})),
    # "a window seat" beside "window seats": the same claim, so a duplicate whatever the cosine
    ("duplicate", frozenset({"d2", "d4"})),
    ("conflict", frozenset({"d5", "d6"})),
    ("stale", frozenset({"d5"})),
    ("strong_fact_in_vector_store", frozenset({"d7"})),
    ("strong_fact_in_vector_store", frozenset({"d10", "d12"})),
    ("store_disagreement", frozenset({"facts:timezone", "d8"})),
    ("missing_metadata", frozenset({"d9"})),
}


# -- facts file ---------------------------------------------------------------------------------


def test_facts_flat_seed_shape() -> None:
    facts = load_facts_file(FIXTURES / "facts.json")
    assert facts.shape == "flat"
    assert facts.as_dict() == {
        "name": "Mia",
        "city": "Lisbon",
        "units": "metric",
        "timezone": "Europe/Lisbon",
    }
    entry = facts.lookup("city")
    assert entry is not None and entry.value == "Lisbon" and entry.line == 3
    assert facts.lookup("Time Zone") is None  # "time_zone" is not "timezone"
    assert facts.lookup("NAME") is not None  # normalized lookup
    assert facts.normalization_collisions == ()


def test_facts_nested_shape_flattens_to_dotted_keys(tmp_path: Path) -> None:
    p = tmp_path / "nested.json"
    p.write_text(
        json.dumps(
            {"user": {"name": "Mia", "diet": {"allergies": ["peanuts", "shellfish"]}}, "tz": "UTC"},
            indent=2,
        )
    )
    facts = load_facts_file(p)
    assert facts.shape == "nested"
    assert facts.as_dict() == {
        "user.name": "Mia",
        "user.diet.allergies": "peanuts, shellfish",
        "tz": "UTC",
    }
    e = facts.lookup("User Name")  # "user.name" normalizes to "user_name"
    assert e is not None and e.key == "user.name" and e.line == 3


def test_facts_records_history_and_collisions() -> None:
    facts = load_facts_file(FIXTURES / "facts_records.json")
    assert facts.shape == "records"
    city = facts.lookup("city")
    assert city is not None and city.value == "Lisbon" and city.source == "session s7"
    assert [e.value for e in facts.history["city"]] == ["Berlin", "Lisbon"]
    assert [c.keys for c in facts.normalization_collisions] == [("User Name", "user_name")]
    assert facts.lookup("user name") is not None
    exact = facts.lookup("User Name")
    assert exact is not None and exact.value == "Mia"


def test_facts_records_latest_by_time_not_file_order(tmp_path: Path) -> None:
    p = tmp_path / "f.json"
    p.write_text(
        json.dumps(
            [
                {"key": "city", "value": "Lisbon", "updated_at": "2026-01-01"},
                {"key": "city", "value": "Berlin", "updated_at": 1735689600},  # 2025-01-01, epoch
            ]
        )
    )
    entry = load_facts_file(p).lookup("city")
    assert entry is not None and entry.value == "Lisbon"
    p.write_text(json.dumps([{"key": "city", "value": "A"}, {"key": "city", "value": "B"}]))
    entry = load_facts_file(p).lookup("city")
    assert entry is not None and entry.value == "B"  # no timestamps: file order


def test_normalize_key() -> None:
    assert normalize_key("User Name") == "user_name" == normalize_key("user-name")
    assert normalize_key("user.name") == normalize_key("userName") == "user_name"
    assert normalize_key("  Time  Zone ") == "time_zone"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{\n  "name": "Mia",\n  "city": Lisbon\n}', ":3:11: invalid JSON"),
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"\xff\xfe{\x00}", "binary"),
        (b'{"name": "Mi\xe9"}', "not UTF-8"),
        (b'"just a string"', "top level is a JSON str"),
        (b'{"name": null}', "key 'name': value is null"),
        (b'{"a": [{"b": 1}]}', "key 'a': value is list"),
        (b'[{"key": "city"}]', "record 1 (key 'city'): missing \"value\""),
        (b'[{"value": "x"}]', 'record 1: missing or non-string "key"'),
        (b'[{"key": "a", "value": "x", "updated_at": "soon"}]', "updated_at 'soon'"),
        (b"[1, 2]", "record 1 is a JSON int"),
    ],
)
def test_facts_bad_input(tmp_path: Path, content: bytes, message: str) -> None:
    p = tmp_path / "facts.json"
    p.write_bytes(content)
    with pytest.raises(StoreError) as err:
        load_facts_file(p)
    assert message in str(err.value)
    assert str(p) in str(err.value)
    assert "\n" not in str(err.value)


def test_facts_missing_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such facts file"):
        load_facts_file(tmp_path / "nope.json")


def test_facts_audit_alone() -> None:
    report = audit(load_facts_file(FIXTURES / "facts_records.json"), None, None, now=NOW)
    assert planted(report) == {
        ("conflict", frozenset({"facts:User Name", "facts:user_name"})),
        ("stale", frozenset({"facts:city@2", "facts:city"})),
    }
    stale = next(f for f in report.findings if f.kind == "stale")
    assert stale.severity == "info"  # history in a facts file is not read by agents
    assert report.tiers["profile"] == 4  # city, allergy, User Name, user_name
    summary = report.stores[0]
    assert isinstance(summary, FactsFileSummary) and summary.shape == "records"
    assert summary.to_dict() == {
        "type": "facts_file",
        "location": str(FIXTURES / "facts_records.json"),
        "shape": "records",
        "keys": 4,
        "superseded_values": 1,
        "normalization_collisions": [
            {"normalized_key": "user_name", "keys": ["User Name", "user_name"]}
        ],
    }
    assert list(report.to_dict()) == ["stores", "layers", "findings"]  # JSON says "layers"


# -- memory tiers (JSON: "layers") and helpers --------------------------------------------------


@pytest.mark.parametrize(
    ("document", "metadata", "tier"),
    [
        ("anything", {"layer": "Episodic Memory"}, "episodic"),
        ("anything", {"type": "summary"}, "session_summary"),
        ("anything", {"kind": "skill"}, "procedural"),
        ("anything", {"category": "用户画像"}, "profile"),
        ("anything", {"memory_type": "knowledge"}, "semantic"),
        ("anything", {"layer": "unknown-thing"}, "semantic"),
        ("I'm allergic to peanuts.", None, "profile"),
        ("The user lives in Lisbon.", {}, "profile"),
        ("Summary of session 3: we discussed the Lisbon trip.", {}, "session_summary"),
        ("We discussed hotels in Porto.", {}, "session_summary"),
        ("How to deploy: run the tests, then push.", {}, "procedural"),
        ("Always run the linter before committing.", {}, "procedural"),
        ("Last time the user asked about hotels in Porto.", {}, "episodic"),
        ("On 2026-02-01 the user booked a flight.", {}, "episodic"),
        ("Porto is three hours from Lisbon by train.", {}, "semantic"),
        ("我对花生过敏。", {}, "profile"),
        ("会话摘要：我们讨论了去波尔图的行程。", {}, "session_summary"),
        ("上次用户问了里斯本的酒店。", {}, "episodic"),
        ("部署步骤：先运行测试，再推送。", {}, "procedural"),
        ("", {}, "semantic"),
    ],
)
def test_assign_tier(document: str, metadata: dict[str, Any] | None, tier: str) -> None:
    assert assign_tier(document, metadata) == tier
    assert tier in TIERS


def test_first_person_rewrite_and_values() -> None:
    assert as_first_person("User lives in Berlin.") == "I live in Berlin."
    assert as_first_person("The user's name is Mia.") == "My name is Mia."
    assert as_first_person("User never eats pork.") == "I never eat pork."
    assert as_first_person("用户对花生过敏。") == "我对花生过敏。"
    assert same_value("Mia", "mia chen") and not same_value("Berlin", "Lisbon")
    assert same_value("UTC+8", "utc+8")


def test_severity_mapping_is_exhaustive() -> None:
    assert set(SEVERITY) == set(KINDS)
    assert set(SEVERITY.values()) <= {"error", "warning", "info"}


# -- near-duplicates: exact and complete --------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "prefix", "scale"),
    [
        ("gaussian", None, 1.0),
        ("clustered", None, 1.0),
        ("gaussian", 96, 1.0),  # the whole width: raw rows multiplied, tiles scaled
        ("gaussian", 96, 1e12),  # norms too large for raw float32 products: normalized copy
        ("clustered", 30, 1e-12),
    ],
)
def test_near_duplicates_match_brute_force(kind: str, prefix: int | None, scale: float) -> None:
    import numpy as np

    from memdiag.stores.neardup import near_duplicate_pairs

    rng = np.random.default_rng(3)
    n, d = 6000, 96
    x = rng.standard_normal((n, d)).astype(np.float32)
    if kind == "clustered":  # a strong shared direction: the prefix bound is loose here
        x = x * np.linspace(2.0, 0.1, d).astype(np.float32) + 1.5
    for _ in range(40):
        a, b = rng.integers(n, size=2)
        x[b] = x[a] + rng.standard_normal(d).astype(np.float32) * rng.uniform(0.02, 0.4) * (
            np.linalg.norm(x[a]) / np.sqrt(d)
        )
    x[7] = 0.0  # zero vectors never pair
    x *= np.float32(scale)
    got = {(i, j) for i, j, _ in near_duplicate_pairs(x, 0.95, block_size=1000, prefix=prefix)}
    xd = x.astype(np.float64)
    norms = np.linalg.norm(xd, axis=1)
    norms[norms == 0] = np.inf
    cos = (xd @ xd.T) / np.outer(norms, norms)
    iu = np.triu_indices(n, 1)
    keep = cos[iu] >= 0.95
    expected = set(zip(iu[0][keep].tolist(), iu[1][keep].tolist(), strict=True))
    assert expected and got == expected


# -- Chroma: refusing what is not a store, and never writing ------------------------------------


def test_not_a_store_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    before = tree_digest(tmp_path)
    with pytest.raises(StoreError, match=r"has no chroma\.sqlite3"):
        open_chroma(str(tmp_path))
    assert tree_digest(tmp_path) == before


def test_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is empty"):
        open_chroma(str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        open_chroma(str(tmp_path / "nope"))
    assert not (tmp_path / "nope").exists()


def test_random_bytes_sqlite(tmp_path: Path) -> None:
    (tmp_path / "chroma.sqlite3").write_bytes(os.urandom(4096))
    before = tree_digest(tmp_path)
    with pytest.raises(StoreError, match="not a readable SQLite database") as err:
        open_chroma(str(tmp_path))
    assert "\n" not in str(err.value)
    assert tree_digest(tmp_path) == before


def test_other_sqlite_file_is_not_a_store(tmp_path: Path) -> None:
    import sqlite3

    con = sqlite3.connect(tmp_path / "chroma.sqlite3")
    con.execute("CREATE TABLE notes (x TEXT)")
    con.commit()
    con.close()
    before = tree_digest(tmp_path)
    with pytest.raises(StoreError, match="lacks Chroma's tables"):
        open_chroma(str(tmp_path))
    assert tree_digest(tmp_path) == before


def test_file_instead_of_directory(tmp_path: Path) -> None:
    f = tmp_path / "chroma.sqlite3"
    f.write_bytes(b"x")
    with pytest.raises(StoreError, match="pass the directory"):
        open_chroma(str(f))


def test_unreachable_server() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UnavailableError, match="unreachable"):
        open_chroma(f"http://127.0.0.1:{port}")


# -- Chroma: reading, audit, retrieval ----------------------------------------------------------


def test_collections_info(store_dir: Path) -> None:
    with open_chroma(str(store_dir)) as store:
        infos = {n: store.collection_info(n) for n in store.collection_names()}
    assert set(infos) == {"clean", "dirty", "l2_space"}
    assert infos["dirty"].count == 13 and infos["dirty"].dimension == 384
    assert infos["dirty"].space == "cosine" and infos["l2_space"].space == "l2"
    assert infos["clean"].embedding_function == "default"


def test_records_paged(store_dir: Path) -> None:
    seen: list[tuple[int, int]] = []
    with open_chroma(str(store_dir)) as store:
        data = store.read("dirty", page_size=4, progress=lambda d, t: seen.append((d, t)))
    records = data.records()
    assert [r.id for r in records] == [r["id"] for r in load_jsonl("dirty.jsonl")]
    assert records[0].embedding is not None and records[0].embedding.dtype.name == "float32"
    assert records[8].metadata == {"note": "planted record without timestamp or layer"}
    assert seen == [(4, 13), (8, 13), (12, 13), (13, 13)]


def test_missing_collection(store_dir: Path) -> None:
    with open_chroma(str(store_dir)) as store, pytest.raises(StoreError, match="no collection"):
        store.read("nope")


def test_audit_dirty_finds_exactly_the_planted_problems(store_dir: Path) -> None:
    facts = load_facts_file(FIXTURES / "facts.json")
    before = tree_digest(store_dir)
    progress: list[tuple[int, int]] = []
    with open_chroma(str(store_dir)) as store:
        report = audit(
            facts,
            store,
            "dirty",
            AuditSettings(),
            progress=lambda d, t: progress.append((d, t)),
            now=NOW,
        )
    assert tree_digest(store_dir) == before
    assert planted(report) == DIRTY_EXPECTED
    assert {f.severity for f in report.findings if f.kind == "conflict"} == {"error"}
    assert progress and progress[-1][0] == progress[-1][1]
    assert sum(report.tiers.values()) == 13 + 4  # records + facts-file keys (profile)
    assert report.tiers["session_summary"] == 1 and report.tiers["procedural"] == 1
    entry = next(s for s in report.stores if isinstance(s, ChromaCollectionSummary))
    assert entry.retrieval_checks == "available" and entry.space == "cosine"
    payload = json.loads(json.dumps(report.to_dict()))
    assert set(payload) == {"stores", "layers", "findings"}
    assert payload["layers"] == report.tiers
    expected_entry = {
        "type": "chroma",
        "location": str(store_dir),
        "mode": "directory",
        "collection": "dirty",
        "count": 13,
        "dimension": 384,
        "space": "cosine",
        "configured_space": "cosine",
        "legacy_space": payload["stores"][1]["legacy_space"],
        "embedding_function": "default",
        "retrieval_checks": "available",
        "retrieval_reason": entry.retrieval_reason,
        "layout": {
            "name": "chroma",
            "text_from": "documents",
            "reason": "plain Chroma: text in documents",
            "tenant_keys": [],
            "bookkeeping": False,
        },
        "records_read": 13,
        "out_of_scope": 0,
        "scope": None,
        "problems": [],
    }
    assert payload["stores"][1] == expected_entry
    assert list(payload["stores"][1]) == list(expected_entry)  # the JSON's key order
    assert {"kind", "severity", "ids", "message"} <= set(payload["findings"][0])


def test_audit_clean_has_no_findings(store_dir: Path) -> None:
    facts = load_facts_file(FIXTURES / "facts.json")
    with open_chroma(str(store_dir)) as store:
        report = audit(facts, store, "clean", AuditSettings(), now=NOW)
    assert report.findings == ()
    assert report.tiers == {
        "profile": 4 + 4,
        "session_summary": 1,
        "episodic": 1,
        "semantic": 1,
        "procedural": 1,
    }


def test_audit_without_facts_file_flags_every_strong_fact(store_dir: Path) -> None:
    with open_chroma(str(store_dir)) as store:
        report = audit(None, store, "clean", AuditSettings(), now=NOW)
    assert planted(report) == {
        ("strong_fact_in_vector_store", frozenset({"c1"})),  # name
        ("strong_fact_in_vector_store", frozenset({"c3"})),  # units
    }


def test_audit_stale_by_age(store_dir: Path) -> None:
    with open_chroma(str(store_dir)) as store:
        report = audit(None, store, "clean", AuditSettings(stale_after_days=45), now=NOW)
    stale = [f for f in report.findings if f.kind == "stale"]
    assert [set(f.ids) for f in stale] == [{"c1"}]  # 2026-01-10; c2 and c3 (epoch) are 2026-01-15


def test_l2_collection_gets_distance_metric_finding(store_dir: Path) -> None:
    facts = load_facts_file(FIXTURES / "facts.json")
    with open_chroma(str(store_dir)) as store:
        report = audit(facts, store, "l2_space", AuditSettings(), now=NOW)
    assert [(f.kind, f.ids) for f in report.findings] == [("distance_metric", ())]
    assert "1 - distance" in report.findings[0].message


def test_space_disagreement(tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "store"
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    client.create_collection(
        "mixed",
        embedding_function=None,
        metadata={"hnsw:space": "cosine"},
        configuration={"hnsw": {"space": "l2"}},
    )
    client.close()
    with open_chroma(str(path)) as store:
        info = store.collection_info("mixed")
        report = audit(None, store, "mixed", AuditSettings(), now=NOW)
    if info.configured_space != info.legacy_space:  # chromadb kept both as written
        assert info.space_disagreement
        assert any(f.kind == "distance_metric" and "legacy" in f.message for f in report.findings)
    # chromadb 1.5 reconciles the two itself, so a legacy store (0.4/0.5 era) is the only way
    # to meet a disagreement: check the rule on the CollectionInfo such a store would give
    from memdiag.stores.audit.metric import space_findings
    from memdiag.stores.chroma import CollectionInfo

    legacy = CollectionInfo("old", 3, 384, "cosine", None, {}, "l2", "cosine")
    found = space_findings(legacy, unit_vectors=True)
    assert legacy.space_disagreement
    assert [(f.kind, f.severity) for f in found] == [("distance_metric", "warning")]
    assert "'l2'" in found[0].message and "'cosine'" in found[0].message


def test_audit_all_collections(store_dir: Path) -> None:
    with open_chroma(str(store_dir)) as store:
        report = audit(None, store, None, AuditSettings(), now=NOW)
    assert {s.collection for s in report.stores if isinstance(s, ChromaCollectionSummary)} == {
        "clean",
        "dirty",
        "l2_space",
    }
    assert len(report.stores) == 3
    assert {f.collection for f in report.findings} == {"clean", "dirty", "l2_space"}


def test_query_equals_chroma_query_and_leaves_store_untouched(store_dir: Path) -> None:
    """The path diagnose takes: find where the fact is stored, then ask Chroma to retrieve."""
    import chromadb
    from chromadb.config import Settings
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction, ONNXMiniLM_L6_V2

    query = "what food allergies do I have"
    before = tree_digest(store_dir)
    with open_chroma(str(store_dir)) as store:
        stored = find_in_store(store, None, "allergic to peanuts")
        ef, _reason = store.embedding_function(stored[0].collection)
        hits = store.query(stored[0].collection, query, 5)
    assert tree_digest(store_dir) == before
    assert (stored[0].collection, stored[0].id) == ("dirty", "d7") and ef is not None
    assert len(hits) == 5 and hits[0].id == "d7"
    assert {h.collection for h in hits} == {"dirty"}

    # An independent client, Chroma embedding the query itself, on a copy of the store.
    copy = store_dir.parent / "independent"
    shutil.copytree(store_dir, copy)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ONNXMiniLM_L6_V2, "DOWNLOAD_PATH", _model_dir_or_skip())
        client = chromadb.PersistentClient(
            path=str(copy), settings=Settings(anonymized_telemetry=False)
        )
        col = client.get_collection("dirty", embedding_function=DefaultEmbeddingFunction())
        ref = col.query(query_texts=[query], n_results=5)
        client.close()
    assert [h.id for h in hits] == ref["ids"][0]
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert [h.distance for h in hits] == pytest.approx(ref["distances"][0], abs=1e-6)


def test_query_refused_without_embedding_function(tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "store"
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    col = client.create_collection("raw", embedding_function=None)
    col.add(ids=["a"], embeddings=[[0.1, 0.2, 0.3]], documents=["User is allergic to peanuts."])
    client.close()
    with open_chroma(str(path)) as store:
        ef, reason = store.embedding_function("raw")
        with pytest.raises(UnavailableError, match="no persisted embedding function") as err:
            store.query("raw", "allergies", 3)
        found = locate(store, "raw", "allergic to peanuts")
    assert ef is None and "no persisted embedding function" in reason
    assert "\n" not in str(err.value)
    assert [m.record.id for m in found] == ["a"]  # lexical matching needs no model
    assert found[0].method != "semantic"


def test_query_refused_when_model_missing(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", str(tmp_path / "no-model"))
    monkeypatch.setenv("HOME", str(tmp_path))  # and nothing in Chroma's cache either
    ef, reason = resolve_embedding_function({"type": "known", "name": "default", "config": {}})
    assert ef is None and "MEMDIAG_ONNX_MODEL_DIR" in reason
    with open_chroma(str(store_dir)) as store:
        ef, reason = store.embedding_function("dirty")
        with pytest.raises(UnavailableError, match="MEMDIAG_ONNX_MODEL_DIR"):
            store.query("dirty", "allergies", 3)
        found = locate(store, "dirty", "allergic to peanuts")
    assert ef is None and "MEMDIAG_ONNX_MODEL_DIR" in reason
    # Where the fact is stored is still found, lexically; no similarity is approximated.
    assert found and found[0].record.id == "d7"
    assert all(m.method != "semantic" for m in found)
    assert not (tmp_path / ".cache").exists()  # chromadb never tried to download


def test_resolve_embedding_function_refuses_remote() -> None:
    ef, reason = resolve_embedding_function(
        {"embedding_function": {"type": "known", "name": "openai", "config": {}}}
    )
    assert ef is None and "openai" in reason
    ef, reason = resolve_embedding_function({"embedding_function": {"type": "legacy"}})
    assert ef is None and "legacy" in reason


def test_find_in_store(store_dir: Path) -> None:
    with open_chroma(str(store_dir)) as store:
        assert [r.id for r in find_in_store(store, "dirty", "allergic to peanuts")][:1] == ["d7"]
        assert {r.id for r in find_in_store(store, "dirty", "对芒果过敏")} >= {"d10", "d12"}
        assert find_in_store(store, "dirty", "owns a red bicycle") == []
        everywhere = find_in_store(store, None, "User lives in Lisbon")
    assert {(r.collection, r.id) for r in everywhere} >= {("dirty", "d6"), ("clean", "c2")}


def test_stores_import_only_downward() -> None:
    """stores/ sits below diagnosis, checks, replay and rendering, and loads no heavy library."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import memdiag.stores.audit, memdiag.stores.retrieval, memdiag.stores.tiers\n"
        "import memdiag.stores.chroma, memdiag.stores.neardup, memdiag.stores.embeddings\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    upward = ("memdiag.diagnos", "memdiag.longterm", "memdiag.checks", "memdiag.cli")
    upward += ("memdiag.render", "memdiag.replay", "memdiag.strategies")
    heavy = ("typer", "rich", "chromadb", "numpy", "onnxruntime")
    assert [m for m in out if m.startswith(upward)] == []
    assert [m for m in out if m.split(".")[0] in heavy] == []


def test_space_advice_names_the_store_s_own_setting() -> None:
    """An L2 space over unnormalized vectors: the fix is said in the library's own terms
    (Chroma's configuration, Qdrant's VectorParams, LanceDB's search distance type)."""
    from memdiag.stores.audit.metric import space_findings
    from memdiag.stores.chroma import CollectionInfo
    from memdiag.stores.vector_reader import VectorCollectionInfo

    advice = {
        getattr(info, "store", "chroma"): space_findings(info, unit_vectors=False)[0].message  # type: ignore[arg-type]
        for info in (
            CollectionInfo("c", 3, 384, "l2", None),
            VectorCollectionInfo("q", 3, 384, "l2", store="qdrant"),
            VectorCollectionInfo("t", 3, 384, "l2", store="lancedb"),
        )
    }
    assert "configuration={'hnsw': {'space': 'cosine'}}" in advice["chroma"]
    assert "VectorParams(distance=Distance.COSINE)" in advice["qdrant"]
    assert ".distance_type('cosine')" in advice["lancedb"]
    assert not any("hnsw" in advice[k] for k in ("qdrant", "lancedb"))
