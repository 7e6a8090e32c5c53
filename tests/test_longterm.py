"""The long-term half of diagnose against a real Chroma store and real MiniLM embeddings.

fixtures/longterm.jsonl states facts in session `mon` and fails in session `thu`; the store is
built from fixtures/memories/agent.jsonl. Ranks below were read off Chroma itself (and the test
re-checks them against an independent query), so the expected verdicts are known answers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.config import Settings
from memdiag.diagnosis import diagnose, failures_from
from memdiag.stores.open import LongTermStores
from memdiag.transcript import load
from tests.conftest import FIXTURES
from tests.test_stores import COSINE, _model_dir_or_skip, build_store

LONGTERM = FIXTURES / "longterm.jsonl"
LONGTERM_ZH = FIXTURES / "longterm_zh.jsonl"


def tree_hash(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def agent_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    model = _model_dir_or_skip()
    path = tmp_path_factory.mktemp("agent") / "store"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.getbasetemp() / "home"))
        mp.setenv("ANONYMIZED_TELEMETRY", "False")
        build_store(path, {"agent": ("agent.jsonl", COSINE)}, model)
    yield path


def _lt(d):
    """The long-term part of a diagnosis, with each store check it ran."""
    assert d.details.long_term is not None
    return d.details.long_term


def run(path: Path, store: Path | None = None, facts: Path | None = None, **store_over):
    t = load(path)
    over = {f"store.{k}": v for k, v in store_over.items()}
    settings = Settings(budget=4000).with_overrides(**over)
    stores = LongTermStores.open(str(facts) if facts else None, str(store) if store else None, None)
    try:
        return {d.at_turn: d for d in diagnose(t, settings, failures_from(t), stores)}
    finally:
        stores.close()


def test_each_vector_store_verdict(agent_store):
    ds = run(LONGTERM, agent_store, top_k=3)
    assert ds[5].verdict == "long_term_not_retrieved" and _lt(ds[5]).retrieval.rank == 4
    assert ds[6].verdict == "in_context" and _lt(ds[6]).retrieval.rank == 1
    assert ds[7].verdict == "long_term_stale"
    stale = _lt(ds[7]).retrieval.contradicting
    assert [(s.id, s.field, s.value) for s in stale] == [("mem-home-old", "location", "berlin")]
    assert ds[8].verdict == "in_context" and _lt(ds[8]).retrieval.rank == 2
    assert ds[9].verdict == "long_term_not_written"
    assert {d.layer for t, d in ds.items() if t != 6 and t != 8} == {"long_term"}
    # strong facts kept only in the vector store are flagged
    assert (
        "strong_fact_in_vector_store" in ds[5].flags
        and "strong_fact_in_vector_store" in ds[6].flags
    )
    assert "strong_fact_in_vector_store" not in ds[8].flags
    assert ds[5].evidence[0].id == "u1" and ds[7].evidence[0].id == "u2"


def test_not_injected_when_injection_budget_cuts(agent_store):
    ds = run(LONGTERM, agent_store, top_k=3, inject_max_tokens=20)
    assert ds[8].verdict == "long_term_not_injected"
    assert ds[6].verdict == "in_context"  # rank 1 still fits


def test_max_distance_makes_far_hits_not_retrieved(agent_store):
    ds = run(LONGTERM, agent_store, top_k=5, max_distance=0.75)
    assert ds[5].verdict == "long_term_not_retrieved"  # rank 4, distance 0.78
    assert _lt(ds[5]).retrieval.distance > 0.75


def test_ranks_and_distances_are_chromas_own(agent_store, model_dir, tmp_path, monkeypatch):
    ds = run(LONGTERM, agent_store, top_k=3)
    import chromadb
    from chromadb.config import Settings as ChromaSettings
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction, ONNXMiniLM_L6_V2

    copy = tmp_path / "copy"
    shutil.copytree(agent_store, copy)  # an independent client must not touch the original
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "DOWNLOAD_PATH", model_dir)
    client = chromadb.PersistentClient(
        path=str(copy), settings=ChromaSettings(anonymized_telemetry=False)
    )
    col = client.get_collection("agent", embedding_function=DefaultEmbeddingFunction())
    t = load(LONGTERM)
    for turn in (5, 6, 7, 8):
        query = t.messages[t.turn(turn).user_index].content
        res = col.query(query_texts=[query], n_results=10)
        ids, dists = res["ids"][0], res["distances"][0]
        r = _lt(ds[turn]).retrieval
        own = _lt(ds[turn]).vector_store.id
        assert ids.index(own) + 1 == r.rank
        assert r.distance == pytest.approx(dists[ids.index(own)], abs=1e-5)
        assert [x.id for x in r.top] == ids[:3]


def test_store_is_byte_identical_after_diagnose(agent_store):
    before = tree_hash(agent_store)
    run(LONGTERM, agent_store, top_k=3)
    result = CliRunner().invoke(
        app, ["diagnose", str(LONGTERM), "--chroma", str(agent_store), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert tree_hash(agent_store) == before


def test_facts_file_is_the_profile_layer(tmp_path):
    ds = run(LONGTERM, facts=FIXTURES / "longterm_facts.json")
    assert ds[5].verdict == "in_context" and _lt(ds[5]).facts_file.key == "allergy"
    assert ds[7].verdict == "long_term_stale"
    assert _lt(ds[7]).facts_file.match == "key_outdated"
    assert ds[9].verdict == "long_term_not_written"  # seats: in no store
    cut = run(LONGTERM, facts=FIXTURES / "longterm_facts.json", inject_max_tokens=12)
    assert cut[5].verdict == "long_term_not_injected"


def test_chinese_long_term_cases(agent_store):
    by_facts = run(LONGTERM_ZH, facts=FIXTURES / "longterm_facts_zh.json")
    assert by_facts[2].verdict == "in_context"
    assert _lt(by_facts[2]).facts_file.key == "过敏"
    not_written = run(LONGTERM_ZH, agent_store)
    assert not_written[2].verdict == "long_term_not_written"
    assert not_written[2].evidence[0].id == "u1" and not_written[2].evidence[0].session == "第一次"


def test_retrieval_skipped_without_model(agent_store, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", str(tmp_path / "no-model"))
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    ds = run(LONGTERM, agent_store, top_k=3)
    assert ds[6].verdict == "long_term_unchecked"
    assert "MEMDIAG_ONNX_MODEL_DIR" in (_lt(ds[6]).skipped_reason or "")
    assert ds[9].verdict == "long_term_not_written"  # lexical search needs no model


def test_cli_bad_store_exit_2(tmp_path):
    (tmp_path / "notastore").mkdir()
    r = CliRunner().invoke(
        app, ["diagnose", str(LONGTERM), "--chroma", str(tmp_path / "notastore")]
    )
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert not (tmp_path / "notastore" / "chroma.sqlite3").exists()
    bad = tmp_path / "facts.json"
    bad.write_text('{"name": "Mia",\n "allergy": }')
    r = CliRunner().invoke(app, ["diagnose", str(LONGTERM), "--facts-file", str(bad)])
    assert r.exit_code == 2 and f"{bad}:2" in r.stderr


def test_diagnose_json_from_cli(agent_store):
    r = CliRunner().invoke(
        app,
        ["diagnose", str(LONGTERM), "--chroma", str(agent_store), "--top-k", "3", "-f", "json"],
    )
    out = json.loads(r.stdout)
    verdicts = [d["verdict"] for d in out["diagnoses"]]
    assert verdicts == [
        "long_term_not_retrieved",
        "in_context",
        "long_term_stale",
        "in_context",
        "long_term_not_written",
    ]
