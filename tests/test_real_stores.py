"""Stores written by the real memory libraries (fixtures/stores/, see the make_*.py scripts).

mem0 2.2.1 (Memory.add(infer=False)), langchain-chroma 1.1.0, LlamaIndex's ChromaVectorStore and
plain chromadb each hold the same memories of one user, Mia, in their own layout and phrasing.
memdiag reads each as written: the layout is detected, the text is found where the library put
it, mem0's bookkeeping collection is skipped, and a multi-tenant store is scoped by user.
The stores are never modified (their files are hashed before and after).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memdiag.errors import UsageError
from memdiag.extract import default_extractor
from memdiag.stores.chroma import open_chroma
from memdiag.stores.embedding_names import choose_model, names_for_dimension
from memdiag.stores.layouts import Scope, detect_layout, read_layout
from tests.conftest import FIXTURES

STORES = FIXTURES / "stores"
# store -> (memory collection, layout, where the text is, records, phrasing)
REAL = {
    "mem0": ("mem0", "mem0", "metadata.data", 18, "subjectless"),
    "langchain": ("langchain", "langchain", "documents", 14, "third"),
    "llamaindex": ("memories", "llamaindex", "documents", 14, "named"),
    "chroma": ("memories", "chroma", "documents", 14, "first"),
}


def md5(text: str) -> str:
    """mem0's ``hash`` of a memory's text."""
    return hashlib.md5(text.encode()).hexdigest()


def tree_digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def read(store: str, scope: Scope | None = None, collection: str | None = None) -> Any:
    name = collection or REAL[store][0]
    with open_chroma(str(STORES / store)) as s:
        return read_layout(s.read(name), scope)


@pytest.mark.parametrize("store", sorted(REAL))
def test_layout_is_detected_and_text_read_where_the_library_put_it(store: str) -> None:
    before = tree_digest(STORES / store)
    _, layout, text_from, count, _ = REAL[store]
    r = read(store)
    assert (r.layout.name, r.layout.text_from) == (layout, text_from)
    assert len(r.data.ids) == count and r.unreadable == () and r.problems == ()
    assert all(d and d.strip() for d in r.data.documents)
    assert r.data.embeddings is not None and r.data.embeddings.shape == (count, 384)
    # the library's own keys are not the user's metadata
    own = {"data", "hash", "text_lemmatized", "_node_content", "_node_type", "doc_id"}
    assert not any(own & set(m) for m in r.data.metadatas)
    assert tree_digest(STORES / store) == before


def test_mem0_text_lives_in_metadata_data() -> None:
    with open_chroma(str(STORES / "mem0")) as s:
        raw = s.read("mem0")
    assert all(not d for d in raw.documents)  # mem0 leaves documents empty
    r = read_layout(raw)
    i = r.data.ids.index("6d656d30-0000-4000-8000-000000000006")
    assert r.data.documents[i] == "Name is Mia"
    assert r.data.metadatas[i]["user_id"] == "mia" and r.data.metadatas[i]["key"] == "name"


def test_mem0_bookkeeping_collection_is_not_memories() -> None:
    r = read("mem0", collection="mem0migrations")
    assert r.layout.bookkeeping and r.layout.name == "mem0"
    assert r.data.ids == [] and r.problems == ()


def test_mem0_is_scoped_by_user_agent_and_run() -> None:
    every = read("mem0")
    assert every.tenants == {
        "user_id=mia": 14,
        "user_id=mia, run_id=kyoto-planning": 1,
        "user_id=tom": 2,
        "agent_id=wayfarer": 1,
    }
    mia = read("mem0", Scope(user_id="mia"))
    assert len(mia.data.ids) == 15 and mia.out_of_scope == 3
    assert "Lives in Paris" not in mia.data.documents  # Tom's
    tom = read("mem0", Scope(user_id="tom"))
    assert sorted(tom.data.documents) == ["Is allergic to shellfish", "Lives in Paris"]
    run = read("mem0", Scope(user_id="mia", run_id="kyoto-planning"))
    assert run.data.documents == ["Is looking at ryokans in Gion for the Kyoto trip"]
    agent = read("mem0", Scope(agent_id="wayfarer"))
    assert agent.data.documents == ["Always answer in metric units"]
    assert Scope(user_id="mia", run_id="r").where() == {
        "$and": [{"user_id": {"$eq": "mia"}}, {"run_id": {"$eq": "r"}}]
    }


def test_scope_on_a_store_without_tenants_says_so_and_reads_all() -> None:
    r = read("langchain", Scope(user_id="mia"))
    assert len(r.data.ids) == 14
    assert r.problems == (
        "collection 'langchain' has no user_id metadata: user_id=mia does not narrow it, "
        "all records are read",
    )


@pytest.mark.parametrize("store", sorted(REAL))
def test_every_phrasing_yields_the_same_facts(store: str) -> None:
    """Subject-less (mem0), "User …" (langchain), "Mia …" (LlamaIndex), "I …" (plain)."""
    r = read(store, Scope(user_id="mia") if store == "mem0" else None)
    ex = default_extractor()
    facts = {
        (e.field, e.value)
        for doc, meta in zip(r.data.documents, r.data.metadatas, strict=True)
        for e in ex.read_memory(doc, meta)
    }
    assert facts == {
        ("name", "Mia"),
        ("allergy", "peanuts"),
        ("location", "Berlin"),
        ("location", "Lisbon"),
        ("timezone", "UTC+1"),
        ("timezone", "UTC+0"),
        ("preference", "window seats on long flights"),
        ("preference", "window seats on all long flights"),
        ("prohibition", "never book Kyoto hotels next to the train station"),
    }


# --- embedding function for collections that did not persist one -------------------------------


def test_langchain_and_mem0_persist_no_embedding_function(monkeypatch: pytest.MonkeyPatch) -> None:
    # without the model at hand nothing can be identified (tests/test_store_models.py: with it)
    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", "/nonexistent")
    for store in ("langchain", "mem0"):
        with open_chroma(str(STORES / store)) as s:
            info = s.collection_info(REAL[store][0])
            assert info.embedding_function is None and info.dimension == 384
            assert s.embedding_function(info.name)[0] is None


def test_names_that_fit_a_dimension() -> None:
    assert names_for_dimension(384)[0] == "default"
    assert "openai:text-embedding-3-small" in names_for_dimension(1536)
    assert "default" not in names_for_dimension(1536)
    assert names_for_dimension(None) == []


def test_a_name_failing_the_dimension_check_is_an_error() -> None:
    with pytest.raises(UsageError, match=r"makes 384-dimensional vectors but collection 'x'"):
        choose_model("default", 1536, "x")
    with pytest.raises(UsageError, match=r"openai.*cannot have made them"):
        choose_model("openai", 384, "langchain")
    with pytest.raises(UsageError, match="unknown --embedding-function 'minilm'"):
        choose_model("minilm", 384, "langchain")
    assert choose_model("openai", 3072, "x").model == "text-embedding-3-large"
    assert choose_model("default", 384, "x").offline


def test_default_reproduces_the_stored_vectors(model_dir: Path) -> None:
    """--embedding-function default is right for these stores: re-embedding gives the vectors."""
    from memdiag.stores.embedding_names import build_embedding_function
    from memdiag.stores.embeddings import embed

    ef, _how = build_embedding_function(choose_model("default", 384, "langchain"))
    for store in ("langchain", "mem0"):
        r = read(store)
        got = embed(ef, r.data.documents[:5])
        cos = np.einsum("ij,ij->i", got, r.data.embeddings[:5])
        assert np.all(cos > 0.999), (store, cos)


# --- bad input: odd records, other library versions ---------------------------------------------


def _store(tmp_path: Path, name: str, rows: list[dict[str, Any]], dim: int = 384) -> Path:
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "store"
    client = chromadb.PersistentClient(str(path), settings=Settings(anonymized_telemetry=False))
    col = client.create_collection(name, embedding_function=None)
    rng = np.random.default_rng(0)
    col.add(
        ids=[r["id"] for r in rows],
        embeddings=[list(map(float, rng.normal(size=dim))) for _ in rows],
        documents=[r.get("document") for r in rows] if any("document" in r for r in rows) else None,
        metadatas=[r["metadata"] for r in rows],
    )
    client.close()
    return path


def test_mem0_records_without_data_are_listed_and_the_rest_read(tmp_path: Path) -> None:
    rows = [
        {
            "id": "a",
            "metadata": {
                "data": "Lives in Berlin",
                "hash": md5("Lives in Berlin"),
                "user_id": "mia",
            },
        },
        {"id": "b", "metadata": {"hash": "h2", "user_id": "mia"}},
        {"id": "c", "metadata": {"data": 42, "hash": "h3", "user_id": "mia"}},
        {
            "id": "d",
            "metadata": {
                "data": "Is allergic to peanuts",
                "hash": md5("Is allergic to peanuts"),
                "user_id": "mia",
                "key": 7,
                "created_at": "not a date",
                "updated_at": 3.5,
            },
        },
    ]
    path = _store(tmp_path, "mem0", rows)
    before = tree_digest(path)
    with open_chroma(str(path)) as s:
        r = read_layout(s.read("mem0"))
    assert r.layout.name == "mem0"
    assert r.data.ids == ["a", "d"] and r.unreadable == ("b", "c")
    assert r.problems == (
        "collection 'mem0' (mem0 layout): 2 of 4 records have no readable text (1 no 'data' "
        "in the metadata; 1 'data' is a int, not text): b, c; read the other 2",
    )
    facts = [
        default_extractor().read_memory(d, m)
        for d, m in zip(r.data.documents, r.data.metadatas, strict=True)
    ]
    assert [[(e.field, e.value) for e in f] for f in facts] == [
        [("location", "Berlin")],
        [("allergy", "peanuts")],
    ]
    assert tree_digest(path) == before


def test_older_llamaindex_keeps_the_text_only_in_node_content(tmp_path: Path) -> None:
    node = {"id_": "n1", "text": "Mia lives in Berlin.", "metadata": {}, "embedding": None}
    rows = [
        {
            "id": "n1",
            "metadata": {
                "_node_content": json.dumps(node),
                "_node_type": "TextNode",
                "doc_id": "None",
            },
        },
        {"id": "n2", "metadata": {"_node_content": "{not json", "_node_type": "TextNode"}},
        {
            "id": "n3",
            "metadata": {"_node_content": json.dumps({"text": ""}), "_node_type": "TextNode"},
        },
    ]
    path = _store(tmp_path, "quickstart", rows)
    with open_chroma(str(path)) as s:
        r = read_layout(s.read("quickstart"))
    assert (r.layout.name, r.layout.text_from) == ("llamaindex", "_node_content")
    assert r.data.documents == ["Mia lives in Berlin."]
    assert r.unreadable == ("n2", "n3")
    assert "1 _node_content is not valid JSON; 1 _node_content holds no text" in r.problems[0]


def test_older_mem0_migrations_record_is_skipped(tmp_path: Path) -> None:
    """mem0 0.1.x kept an anonymous user id, with a 1536-d dummy vector, in mem0migrations."""
    rows = [{"id": "u-1", "metadata": {"user_id": "u-1", "type": "user_identity"}}]
    path = _store(tmp_path, "mem0migrations", rows, dim=1536)
    with open_chroma(str(path)) as s:
        r = read_layout(s.read("mem0migrations"))
    assert r.layout.bookkeeping and r.data.ids == []


def test_layout_detection_from_shape_alone() -> None:
    assert detect_layout("x", [None, None], [{"data": "a", "user_id": "u"}] * 2).name == "mem0"
    assert detect_layout("x", ["a"], [{"memory": "a", "hash": "h"}]).text_from == "metadata.memory"
    assert detect_layout("langchain", ["a"], [{}]).name == "langchain"
    assert detect_layout("notes", ["a"], [{"data": "x"}]).name == "chroma"  # no hash, has text
    assert detect_layout("notes", [], []).name == "chroma"


# --- stale and conflict from metadata as well as text -------------------------------------------


def _hit(id_: str, rank: int, text: str, meta: dict[str, Any]) -> Any:
    from memdiag.stores.chroma import Hit

    return Hit(id_, rank, 0.1 * rank, text, meta, "c")


def test_same_key_older_date_contradicts_even_when_the_text_says_nothing() -> None:
    from memdiag.stores.memories import contradictions

    own = ("User relocated to Lisbon.", {"key": "home_city", "updated_at": "2026-06-02"})
    hits = [
        _hit("new", 1, *own),
        _hit("old", 2, "User's home: Berlin.", {"key": "home_city", "updated_at": "2026-01-10"}),
        _hit("other", 3, "User lives in Paris.", {"key": "home_city", "user_id": "tom"}),
    ]
    found = contradictions("I live in Lisbon", own[0], own[1], hits, {"new"})
    assert [(c.id, c.field, c.value, c.how, c.older) for c in found] == [
        ("old", "location", "User's home: Berlin.", "metadata.key", True)
    ]


def test_issue_example_berlin_then_lisbon() -> None:
    from memdiag.stores.memories import claims, contradictions

    old = ("User lives in Berlin.", {"key": "home_city", "updated_at": "2026-01-15T10:00:00Z"})
    new = ("User moved to Lisbon.", {"key": "home_city", "updated_at": "2026-06-01T10:00:00Z"})
    hits = [_hit("new", 1, *new), _hit("old", 2, *old)]
    found = contradictions("I moved to Lisbon", new[0], new[1], hits, {"new"})
    assert [(c.id, c.value, c.older) for c in found] == [("old", "Berlin", True)]
    cs = claims([old[0], new[0]], [old[1], new[1]])
    assert [(c.subject, c.value, c.ts.month if c.ts else None) for c in cs] == [
        ("location", "Berlin", 1),
        ("location", "Lisbon", 6),
    ]


# --- the audit and diagnose on each real store (through the CLI, as a user runs them) -----------

CONVERSATION = STORES / "conversation.jsonl"
PHRASING = {store: REAL[store][4] for store in REAL}


def _slug_ids(store: str) -> dict[str, list[str]]:
    """Scenario slug -> record ids, by matching the stored text to the scenario."""
    import sys

    sys.path.insert(0, str(STORES))
    try:
        import scenario  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(STORES))
    r = read(store)
    by_text: dict[str, list[str]] = {}
    for i, doc in zip(r.data.ids, r.data.documents, strict=True):
        by_text.setdefault(doc, []).append(i)
    out: dict[str, list[str]] = {}
    for slug, _ts, _extra, texts in scenario.MEMORIES:
        ids = by_text[texts[PHRASING[store]]]
        out[slug] = [ids.pop(0)] if slug.startswith("seat") and len(ids) > 1 else list(ids)
    return out


def _cli(*args: str) -> dict[str, Any]:
    from typer.testing import CliRunner

    from memdiag.cli import app

    result = CliRunner().invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# planted: (kind, severity, slugs), the same in every store; the time zones UTC+1 and UTC+0
# (cosine 0.93-0.99) are a conflict, never near-duplicates to merge
PLANTED = [
    ("conflict", "error", {"home-old", "home-new"}),
    ("conflict", "error", {"tz-old", "tz-new"}),
    ("duplicate", "warning", {"seat", "seat-dup"}),
    ("stale", "warning", {"home-old"}),
    ("stale", "warning", {"tz-old"}),
    ("strong_fact_in_vector_store", "warning", {"name"}),
    ("strong_fact_in_vector_store", "warning", {"allergy"}),
    ("strong_fact_in_vector_store", "warning", {"tz-old"}),
    ("strong_fact_in_vector_store", "warning", {"tz-new"}),
    ("strong_fact_in_vector_store", "warning", {"kyoto-rule"}),
    ("near_duplicate", "info", {"seat", "seat-near"}),
]
# L2 over unit vectors: an info finding; LlamaIndex's collection uses cosine
L2 = {"mem0": True, "langchain": True, "llamaindex": False, "chroma": True}
# only the plain store writes layer metadata (type: semantic)
MISSING_LAYER = {"mem0": True, "langchain": True, "llamaindex": True, "chroma": False}


@pytest.mark.parametrize("store", sorted(REAL))
def test_audit_findings_of_each_real_store(store: str) -> None:
    before = tree_digest(STORES / store)
    args = ["inspect-store", "--chroma", str(STORES / store)]
    report = _cli(*args, *(["--user-id", "mia"] if store == "mem0" else []))
    ids = _slug_ids(store)
    name_of = {i: slug for slug, group in ids.items() for i in group}
    got = sorted(
        (f["kind"], f["severity"], sorted(name_of[i] for i in f["ids"]))
        for f in report["findings"]
        if f["kind"] not in ("distance_metric", "missing_metadata")
    )
    want = [(k, s, sorted(slugs)) for k, s, slugs in PLANTED]
    assert got == sorted(want)
    kinds = [f["kind"] for f in report["findings"]]
    assert ("distance_metric" in kinds) is L2[store]
    assert ("missing_metadata" in kinds) is MISSING_LAYER[store]
    conflicts = [f["message"] for f in report["findings"] if f["kind"] == "conflict"]
    tenant = " (user_id=mia)" if store == "mem0" else ""
    assert (
        f"location{tenant}: the store holds different values: 'Berlin' (2026-01-10); "
        "'Lisbon' (2026-06-02); the newest says 'Lisbon'"
    ) in conflicts
    chroma = [s for s in report["stores"] if s["type"] == "chroma"]
    memories = [s for s in chroma if not s["layout"]["bookkeeping"]]
    assert [s["layout"]["name"] for s in memories] == [REAL[store][1]]
    assert tree_digest(STORES / store) == before


def test_mem0_store_without_scope_keeps_tenants_apart() -> None:
    report = _cli("inspect-store", "--chroma", str(STORES / "mem0"))
    skipped, mem0 = report["stores"]
    assert skipped["collection"] == "mem0migrations" and skipped["layout"]["bookkeeping"]
    assert skipped["retrieval_reason"].startswith("not audited")
    assert mem0["records_read"] == 18 and mem0["scope"] is None
    messages = [f["message"] for f in report["findings"]]
    # Tom lives in Paris: no conflict with Mia's cities
    assert not any("Paris" in m for m in messages if "conflict" in m)
    assert any("allergy = 'shellfish' (user_id=tom)" in m for m in messages)
    assert any("units = 'metric' (agent_id=wayfarer)" in m for m in messages)
    scoped = _cli("inspect-store", "--chroma", str(STORES / "mem0"), "--user-id", "mia")
    assert scoped["stores"][1]["records_read"] == 15 and scoped["stores"][1]["out_of_scope"] == 3


@pytest.mark.parametrize("user", ["tom", "mia"])
def test_duplicates_are_found_within_a_tenant_only(tmp_path: Path, user: str) -> None:
    """Tom saying what Mia said is his own memory, not a duplicate of hers (mem0 searches one
    user at a time); the same copy under Mia is one."""
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "store"
    shutil.copytree(STORES / "mem0", path)
    client = chromadb.PersistentClient(str(path), settings=Settings(anonymized_telemetry=False))
    col = client.get_collection("mem0")
    seat = _slug_ids("mem0")["seat"][0]
    got = col.get(ids=[seat], include=["embeddings", "metadatas", "documents"])
    meta = {**got["metadatas"][0], "user_id": user}
    col.add(ids=["copy"], embeddings=got["embeddings"], metadatas=[meta])
    client.close()
    report = _cli("inspect-store", "--chroma", str(path))
    holding = {f["kind"] for f in report["findings"] if "copy" in f["ids"]}
    if user == "tom":
        assert not holding & {"duplicate", "near_duplicate"}
    else:
        assert "duplicate" in holding


VERDICTS = {
    6: "long_term_not_retrieved",  # allergy: snack and flight memories outrank it
    7: "long_term_stale",  # Lisbon retrieved with Berlin (same key, older)
    8: "in_context",  # window seats at rank 1
    9: "long_term_not_written",  # the dog's name
    10: "long_term_not_injected",  # the Kyoto rule, cut by the injection budget
}


@pytest.mark.parametrize("store", sorted(REAL))
def test_long_term_verdicts_of_planted_failures(
    store: str, tmp_path: Path, model_dir: Path
) -> None:
    """Retrieval verdicts embed each query with the real MiniLM (skipped without it)."""
    before = tree_digest(STORES / store)
    config = tmp_path / "memdiag.yaml"
    config.write_text("store:\n  inject_max_tokens: 120\n", encoding="utf-8")
    args = [
        "diagnose",
        str(CONVERSATION),
        "--chroma",
        str(STORES / store),
        "--top-k",
        "3",
        "--config",
        str(config),
    ]
    if store in ("mem0", "langchain"):  # no persisted embedding function
        args += ["--embedding-function", "default"]
    if store == "mem0":
        args += ["--user-id", "mia"]
    out = _cli(*args)
    ds = {d["at_turn"]: d for d in out["diagnoses"]}
    assert {t: d["verdict"] for t, d in ds.items()} == VERDICTS
    ids = _slug_ids(store)
    assert ds[6]["details"]["retrieval"]["rank"] > 3
    assert "strong_fact_in_vector_store" in ds[6]["flags"]
    stale = ds[7]["details"]["retrieval"]["contradicting"]
    assert [(s["id"], s["field"], s["value"], s["older"]) for s in stale] == [
        (ids["home-old"][0], "location", "berlin", True)
    ]
    assert ds[8]["details"]["retrieval"]["rank"] == 1
    assert ds[10]["details"]["retrieval"]["rank"] == 2
    assert tree_digest(STORES / store) == before


@pytest.mark.parametrize("store", ["mem0", "langchain"])
def test_without_embedding_function_retrieval_is_unchecked_and_says_what_fits(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no model at hand: nothing to identify the vectors with (with one: tests/test_store_models.py)
    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", "/nonexistent")
    out = _cli("diagnose", str(CONVERSATION), "--chroma", str(STORES / store), "--top-k", "3")
    ds = {d["at_turn"]: d for d in out["diagnoses"]}
    assert ds[8]["verdict"] == "long_term_unchecked"
    reason = ds[8]["details"]["skipped_reason"]
    assert "name the model of its 384-dimensional vectors with --embedding-function default" in (
        reason
    )
    assert ds[9]["verdict"] == "long_term_not_written"  # found nowhere, whatever the model


def test_embedding_function_failing_the_dimension_check_exits_2() -> None:
    from typer.testing import CliRunner

    from memdiag.cli import app

    result = CliRunner().invoke(
        app,
        ["inspect-store", "--chroma", str(STORES / "langchain"), "--embedding-function", "openai"],
    )
    assert result.exit_code == 2
    assert "cannot have made them (names that fit 384: default" in result.output
    assert "Traceback" not in result.output


def test_cli_bad_records_one_line_and_the_rest_audited(tmp_path: Path) -> None:
    """Odd metadata types and records without `data`: one warning line, no traceback, the
    readable records audited, the store byte-identical."""
    from typer.testing import CliRunner

    from memdiag.cli import app

    rows = [
        {
            "id": "a",
            "metadata": {
                "data": "Lives in Berlin",
                "hash": md5("Lives in Berlin"),
                "user_id": "mia",
                "key": "home_city",
                "updated_at": "2026-01-10",
            },
        },
        {"id": "b", "metadata": {"hash": "h2", "user_id": "mia"}},
        {"id": "c", "metadata": {"data": 42, "hash": "h3", "user_id": "mia", "key": 3.5}},
        {
            "id": "d",
            "metadata": {
                "data": "Moved to Lisbon",
                "hash": md5("Moved to Lisbon"),
                "user_id": "mia",
                "key": "home_city",
                "updated_at": 1780000000,
            },
        },
        {
            "id": "e",
            "metadata": {
                "data": "Is allergic to peanuts",
                "hash": md5("Is allergic to peanuts"),
                "user_id": 7,
                "created_at": True,
                "categories": "health",
            },
        },
    ]
    path = _store(tmp_path, "mem0", rows)
    before = tree_digest(path)
    result = CliRunner().invoke(app, ["inspect-store", "--chroma", str(path), "-f", "json"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: collection 'mem0' (mem0 layout): 2 of 5 records have no readable text (1 "
        "no 'data' in the metadata; 1 'data' is a int, not text): b, c; read the other 3"
    ]
    report = json.loads(result.stdout)
    kinds = {(f["kind"], tuple(f["ids"])) for f in report["findings"]}
    assert ("conflict", ("a", "d")) in kinds and ("stale", ("a",)) in kinds
    assert ("strong_fact_in_vector_store", ("e",)) in kinds
    assert report["stores"][0]["problems"] == [warnings[0].removeprefix("warning: ")]
    assert tree_digest(path) == before


def test_newer_mem0_text_key_is_read(tmp_path: Path) -> None:
    """A mem0 that names the text `memory` (as its platform API does) is read the same way."""
    rows = [
        {"id": "a", "metadata": {"memory": "Lives in Berlin", "hash": "h1", "user_id": "mia"}},
        {"id": "b", "metadata": {"memory": "Is vegetarian", "hash": "h2", "user_id": "mia"}},
    ]
    path = _store(tmp_path, "memories", rows)
    with open_chroma(str(path)) as s:
        r = read_layout(s.read("memories"))
    assert (r.layout.name, r.layout.text_from) == ("mem0", "metadata.memory")
    assert r.data.documents == ["Lives in Berlin", "Is vegetarian"]


def test_diagnose_never_queries_an_older_mem0_bookkeeping_collection(
    tmp_path: Path, model_dir: Path
) -> None:
    """Older mem0 kept a 1536-d placeholder in mem0migrations beside 384-d memories."""
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "store"
    shutil.copytree(STORES / "mem0", path)
    client = chromadb.PersistentClient(str(path), settings=Settings(anonymized_telemetry=False))
    client.get_collection("mem0migrations").add(
        ids=["anon"], embeddings=[[0.1] * 1536], metadatas=[{"user_id": "anon", "type": "x"}]
    )
    client.close()
    out = _cli(
        "diagnose",
        str(CONVERSATION),
        "--chroma",
        str(path),
        "--top-k",
        "3",
        "--embedding-function",
        "default",
        "--user-id",
        "mia",
    )
    assert {d["at_turn"]: d["verdict"] for d in out["diagnoses"]}[8] == "in_context"


def test_check_spec_scopes_a_mem0_store(tmp_path: Path, model_dir: Path) -> None:
    """`memdiag check` takes the same store settings: a CI case on one user of a mem0 store."""
    from typer.testing import CliRunner

    from memdiag.cli import app

    spec = tmp_path / "checks.yaml"
    spec.write_text(
        f"""version: 1
cases:
  - name: mem0 Lisbon is stale
    transcript: {CONVERSATION}
    store: {{chroma: {STORES / "mem0"}, user_id: mia, embedding_function: default, top_k: 3}}
    expect:
      - verdict: long_term_stale
        fact: "I moved to Lisbon"
      - max_findings: {{conflict: 2}}
""",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["check", str(spec)])
    assert result.exit_code == 0, result.output
    assert "1 passed, 0 failed" in result.stdout


def test_mem0_hash_that_does_not_match_the_text_is_reported(tmp_path: Path) -> None:
    rows = [
        {"id": "ok", "metadata": {"data": "Lives in Berlin", "hash": md5("Lives in Berlin")}},
        {"id": "edited", "metadata": {"data": "Lives in Lisbon", "hash": md5("Lives in Berlin")}},
    ]
    path = _store(tmp_path, "mem0", rows)
    with open_chroma(str(path)) as s:
        r = read_layout(s.read("mem0"))
    assert r.data.ids == ["ok", "edited"]  # both read: the text is there
    assert r.problems == (
        "collection 'mem0' (mem0 layout): 1 records carry a 'hash' that is not the md5 of their "
        "text (edited outside mem0? its duplicate check will miss them): edited",
    )
    # the real store's hashes are mem0's own
    assert read("mem0").problems == ()
