"""Knowing the model without being told, and settings that are not settings (docs/stores.md).

fixtures/stores/mem0 and langchain persisted no embedding function: memdiag re-embeds a few
stored documents with the model at hand (MiniLM, offline) and uses it when it reproduces the
stored vectors. fixtures/stores/openai1536 persisted chromadb's OpenAI function (1536-d);
fixtures/stores/autogen was written by AutoGen's ChromaDBVectorMemory (metadata
``distance_metric: cosine``, which Chroma ignores). Every store is hashed before and after.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.stores.chroma import open_chroma
from tests.conftest import FIXTURES
from tests.test_real_stores import CONVERSATION, VERDICTS, tree_digest

STORES = FIXTURES / "stores"


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _json(*args: str) -> dict[str, Any]:
    result = _run(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("store", "collection"), [("mem0", "mem0"), ("langchain", "langchain")])
def test_model_identified_from_the_stored_vectors(
    store: str, collection: str, model_dir: Path
) -> None:
    before = tree_digest(STORES / store)
    report = _json("inspect-store", "--chroma", str(STORES / store))
    entry = next(s for s in report["stores"] if s["collection"] == collection)
    assert entry["embedding_function"] is None  # nothing persisted
    assert entry["retrieval_checks"] == "available"
    assert entry["retrieval_reason"].startswith(
        "vectors reproduced by all-MiniLM-L6-v2: 5/5 records"
    )
    assert tree_digest(STORES / store) == before


@pytest.mark.parametrize("store", ["mem0", "langchain"])
def test_diagnose_without_the_flag_gets_the_verdicts_of_the_identified_model(
    store: str, tmp_path: Path, model_dir: Path
) -> None:
    config = tmp_path / "memdiag.yaml"
    config.write_text("store:\n  inject_max_tokens: 120\n", encoding="utf-8")
    args = ["diagnose", str(CONVERSATION), "--chroma", str(STORES / store), "--top-k", "3"]
    args += ["--config", str(config), *(["--user-id", "mia"] if store == "mem0" else [])]
    out = _json(*args)
    assert {d["at_turn"]: d["verdict"] for d in out["diagnoses"]} == VERDICTS


def test_a_model_that_does_not_reproduce_the_vectors_is_not_used(
    tmp_path: Path, model_dir: Path
) -> None:
    """384-d vectors from some other model (random here): MiniLM is tried, and refused."""
    import chromadb
    import numpy as np
    from chromadb.config import Settings

    path = tmp_path / "s"
    client = chromadb.PersistentClient(str(path), settings=Settings(anonymized_telemetry=False))
    col = client.create_collection("notes", embedding_function=None)
    rng = np.random.default_rng(3)
    col.add(
        ids=["a", "b"],
        documents=["Lives in Berlin", "Likes tea"],
        embeddings=rng.normal(size=(2, 384)).tolist(),
    )
    client.close()
    report = _json("inspect-store", "--chroma", str(path))
    reason = report["stores"][0]["retrieval_reason"]
    assert report["stores"][0]["retrieval_checks"] == "skipped"
    assert "all-MiniLM-L6-v2 reproduced 0/2 stored vectors (lowest cosine" in reason
    assert "--embedding-function default" in reason


def test_flag_overrides_identification() -> None:
    with open_chroma(str(STORES / "langchain")) as s:
        from memdiag.stores.layouts import ReadOptions

        s.options = ReadOptions(embedding_function="default")
        ef, how = s.embedding_function("langchain")
    if ef is None:
        pytest.skip(f"no offline embedding model: {how}")
    assert how.endswith("named by --embedding-function")


@pytest.mark.parametrize("flag", ["default", "cohere", "ollama:all-minilm"])
def test_flag_against_a_persisted_function_is_an_error(flag: str) -> None:
    store = STORES / "openai1536"
    before = tree_digest(store)
    result = _run("inspect-store", "--chroma", str(store), "--embedding-function", flag)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert (
        f"--embedding-function {flag} contradicts collection 'memories': it persisted its own "
        "embedding function 'openai' for its 1536-dimensional vectors"
    ) in " ".join(result.output.split())
    assert tree_digest(store) == before


def test_flag_naming_the_persisted_function_with_the_wrong_dimension_is_an_error() -> None:
    result = _run(
        "inspect-store",
        "--chroma",
        str(STORES / "openai1536"),
        "--embedding-function",
        "openai:text-embedding-3-large",
    )
    assert result.exit_code == 2
    result = _run(
        "inspect-store", "--chroma", str(STORES / "openai1536"), "--embedding-function", "openai"
    )
    assert result.exit_code == 0, result.output  # it names the persisted one, 1536 fits


def test_persisted_openai_function_is_reported_not_run() -> None:
    report = _json("inspect-store", "--chroma", str(STORES / "openai1536"))
    entry = report["stores"][0]
    assert (entry["embedding_function"], entry["dimension"]) == ("openai", 1536)
    assert entry["retrieval_checks"] == "skipped"


# --- AutoGen: metadata that looks like a setting ----------------------------------------------


def test_autogen_store_layout_and_planted_findings() -> None:
    store = STORES / "autogen"
    before = tree_digest(store)
    report = _json("inspect-store", "--chroma", str(store))
    (entry,) = report["stores"]
    assert entry["layout"]["name"] == "autogen" and entry["space"] == "l2"
    with open_chroma(str(store)) as s:
        data = s.memories("preferences").data
    by_text = dict(zip(data.documents, data.ids, strict=True))
    assert not any("mime_type" in m for m in data.metadatas)  # AutoGen's own key

    def ids(*texts: str) -> list[str]:
        return sorted(by_text[t] for t in texts)

    got = sorted((f["kind"], f["severity"], sorted(f["ids"])) for f in report["findings"])
    assert got == sorted(
        [
            ("conflict", "error", ids("The user lives in Berlin.", "The user moved to Lisbon.")),
            ("stale", "warning", ids("The user lives in Berlin.")),
            (
                "duplicate",
                "warning",
                ids(
                    "The user prefers window seats on long flights.",
                    "The user likes a window seat on long flights.",
                ),
            ),
            ("strong_fact_in_vector_store", "warning", ids("The user's name is Mia Lopez.")),
            ("strong_fact_in_vector_store", "warning", ids("The user is allergic to peanuts.")),
            (
                "strong_fact_in_vector_store",
                "warning",
                ids("Always answer the user in metric units."),
            ),
            ("distance_metric", "warning", []),
            ("distance_metric", "info", []),
            # the name reads as profile and the metric rule as procedural from their content
            (
                "missing_metadata",
                "info",
                ids(
                    "The user is allergic to peanuts.",
                    "The user lives in Berlin.",
                    "The user prefers window seats on long flights.",
                    "The user likes a window seat on long flights.",
                    "The user moved to Lisbon.",
                    "Tom Becker lives in Paris.",
                ),
            ),
        ]
    )
    metric = next(
        f
        for f in report["findings"]
        if f["kind"] == "distance_metric" and f["severity"] == "warning"
    )
    assert metric["message"].startswith(
        "collection 'preferences': metadata distance_metric='cosine' is not a Chroma setting "
        "(AutoGen's ChromaDBVectorMemory writes it); the index uses 'l2'"
    )
    # Tom Becker's Paris joins no conflict of the user's
    assert not any("Paris" in f["message"] for f in report["findings"] if f["kind"] == "conflict")
    assert tree_digest(store) == before
