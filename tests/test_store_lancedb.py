"""CrewAI ≥ 1.10's memory, a LanceDB folder, through ``inspect-store --store`` (docs/stores.md).

fixtures/stores/crewai_lancedb was written by crewai 1.15.30's own ``LanceDBStorage``
(make_crewai_lancedb.py). Reading it needs lancedb (the optional extra memdiag[lancedb]); without
it these tests skip, saying so. Every test hashes the folder's files before and after.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_json_contract import validate
from tests.test_real_stores import tree_digest
from tests.test_store_files import STORES, findings, run

FOLDER = STORES / "crewai_lancedb"
needs_lancedb = pytest.mark.skipif(
    importlib.util.find_spec("lancedb") is None, reason="lancedb (memdiag[lancedb]) not installed"
)

# ids are make_crewai_lancedb.py's deterministic uuids, in the order it saved the memories
IDS = {n: f"63726577-0000-4000-8000-{n:012x}" for n in range(1, 20)}
NAME, ALLERGY, BERLIN, UTC1, SEAT, SEAT_AGAIN, SEAT_ALL = (IDS[n] for n in range(1, 8))
KYOTO_RULE, LISBON, UTC0, SEAT_PARA, TOM_BECKER, METRIC = (IDS[n] for n in (12, 13, 14, 15, 16, 17))
TOM_ALLERGY = IDS[19]
MIA = sorted(IDS[n] for n in range(1, 17))

MIA_FINDINGS = sorted(
    [
        ("conflict", "error", [BERLIN, LISBON]),  # Berlin (January), Lisbon (June)
        ("conflict", "error", [UTC1, UTC0]),
        ("stale", "warning", [BERLIN]),
        ("stale", "warning", [UTC1]),
        ("duplicate", "warning", [SEAT, SEAT_AGAIN]),  # written twice
        ("duplicate", "warning", [SEAT, SEAT_PARA]),  # the same claim in other words
        ("strong_fact_in_vector_store", "warning", [NAME]),
        ("strong_fact_in_vector_store", "warning", [ALLERGY]),
        ("strong_fact_in_vector_store", "warning", [UTC1]),
        ("strong_fact_in_vector_store", "warning", [UTC0]),
        ("strong_fact_in_vector_store", "warning", [KYOTO_RULE]),
        ("near_duplicate", "info", sorted([SEAT, SEAT_ALL, SEAT_PARA])),  # from stored vectors
        ("distance_metric", "info", []),  # LanceDB's L2 over unit vectors
        ("missing_metadata", "info", MIA),  # no layer metadata
    ]
)


def audit(*args: str, folder: Path = FOLDER) -> dict[str, Any]:
    before = tree_digest(folder)
    result = run("inspect-store", "--store", str(folder), *args, "-f", "json")
    assert result.exit_code == 0, result.output
    assert tree_digest(folder) == before  # read in place, not a byte changed
    return validate("inspect-store", result.stdout)  # the published JSON Schema


@needs_lancedb
def test_crewai_memory_audited_like_chroma_and_qdrant() -> None:
    """Mia's memories (source "mia"): the same planted findings as every other store."""
    report = audit("--user-id", "mia")
    (entry,) = report["stores"]
    assert (entry["type"], entry["mode"], entry["collection"]) == (
        "lancedb",
        "directory",
        "memories",
    )
    assert entry["layout"]["name"] == "crewai-memory" and entry["layout"]["text_from"] == "content"
    assert entry["layout"]["tenant_keys"] == ["user_id", "agent_id"]
    assert (entry["count"], entry["records_read"], entry["out_of_scope"]) == (19, 16, 3)
    assert (entry["dimension"], entry["space"], entry["scope"]) == (384, "l2", "user_id=mia")
    assert entry["problems"] == []
    assert findings(report) == MIA_FINDINGS
    # "Tom Becker lives in Paris" is Tom's city: never part of Mia's location conflict
    assert not any(
        TOM_BECKER in f["ids"] for f in report["findings"] if f["kind"] != "missing_metadata"
    )
    # the vectors are there: the model is identified by re-embedding stored documents, and
    # diagnose queries with it (tests/test_store_diagnose.py)
    reason = entry["retrieval_reason"]
    if "not installed" in reason:
        assert entry["retrieval_checks"] == "skipped"
    else:
        assert reason.startswith("vectors reproduced by all-MiniLM-L6-v2: 5/5 records")
        assert entry["retrieval_checks"] == "available"


@needs_lancedb
def test_every_tenant_without_a_scope() -> None:
    """All 19 rows: the agent's own rule (no source) and Tom's allergy are strong facts of their
    tenants; Tom's Paris is no conflict with Mia's cities."""
    report = audit()
    (entry,) = report["stores"]
    assert (entry["records_read"], entry["out_of_scope"], entry["scope"]) == (19, 0, None)
    got = [f for f in findings(report) if f[0] != "missing_metadata"]
    expected = [f for f in MIA_FINDINGS if f[0] != "missing_metadata"]
    expected += [
        ("strong_fact_in_vector_store", "warning", [METRIC]),  # units = metric, the agent's
        ("strong_fact_in_vector_store", "warning", [TOM_ALLERGY]),
    ]
    assert got == sorted(expected)
    messages = " ".join(f["message"] for f in report["findings"])
    assert "units = 'metric' (agent_id=travel-agent)" in messages
    assert "(user_id=tom, agent_id=travel-agent)" in messages


@needs_lancedb
def test_the_table_folder_itself_reads_the_same() -> None:
    report = audit("--user-id", "mia", folder=FOLDER / "memories.lance")
    assert findings(report) == MIA_FINDINGS
    assert report["stores"][0]["location"].endswith("memories.lance")


@needs_lancedb
def test_crewai_fields_become_record_metadata() -> None:
    """scope, categories, importance, dates, source → user_id, the scope's agent → agent_id."""
    from memdiag.stores.documents import open_store

    before = tree_digest(FOLDER)
    with open_store(str(FOLDER)) as store:
        assert store.collection_names() == ["memories"]
        data = store.memories("memories").data
    assert tree_digest(FOLDER) == before
    by_id = dict(zip(data.ids, zip(data.documents, data.metadatas, strict=True), strict=True))
    text, meta = by_id[BERLIN]
    assert text == "Mia lives in Berlin."
    assert meta == {
        "key": "home_city",  # metadata_str, as the caller passed it
        "scope": "/crew/travel-crew/agent/travel-agent/profile",
        "importance": 0.9,
        "created_at": "2026-01-10T09:00:00",  # naive UTC, as CrewAI writes utcnow()
        "last_accessed": "2026-01-10T09:00:00",
        "private": False,
        "source": "mia",
        "user_id": "mia",
        "agent_id": "travel-agent",
    }
    assert by_id[SEAT][1]["categories"] == "travel"  # categories_str
    assert "user_id" not in by_id[METRIC][1]  # written by the agent, for no one user
    assert data.embeddings is not None and data.embeddings.shape == (19, 384)


@needs_lancedb
@pytest.mark.parametrize("page", [1, 4, 1000])
def test_any_page_size_reads_the_same_records(page: int) -> None:
    from memdiag.stores.documents import open_store

    with open_store(str(FOLDER)) as store:
        whole = store.memories("memories").data
    with open_store(str(FOLDER)) as store:
        paged = store.memories("memories", page_size=page).data
    assert paged.ids == whole.ids and paged.documents == whole.documents
    assert paged.embeddings is not None and whole.embeddings is not None
    assert (paged.embeddings == whole.embeddings).all()


def test_without_the_extra_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lancedb", None)  # import fails as if absent
    result = run("inspect-store", "--store", str(FOLDER))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "is a LanceDB store: reading it needs lancedb (pip install 'memdiag[lancedb]')" in (
        " ".join(result.output.split())
    )


def _no_manifest(t: Path) -> None:
    for p in (t / "_versions").glob("*.manifest"):
        p.unlink()


def _truncated_fragments(t: Path) -> None:
    for p in (t / "data").glob("*.lance"):
        p.write_bytes(p.read_bytes()[:100])


def _garbage_manifests(t: Path) -> None:
    for p in (t / "_versions").glob("*.manifest"):
        p.write_bytes(b"garbage\n")


def _no_data(t: Path) -> None:
    shutil.rmtree(t / "data")


@needs_lancedb
@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (_no_manifest, "holds no .manifest (a partial copy?)"),
        (_truncated_fragments, "cannot read table 'memories' of LanceDB store"),
        (_garbage_manifests, "cannot read LanceDB store"),
        (_no_data, "Not found"),
    ],
)
def test_a_damaged_folder_is_one_line_exit_2(tmp_path: Path, damage: Any, says: str) -> None:
    folder = tmp_path / "memory"
    shutil.copytree(FOLDER, folder)
    damage(folder / "memories.lance")
    before = tree_digest(folder)
    result = run("inspect-store", "--store", str(folder), "-f", "json")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stdout == "" and len(result.output.strip().splitlines()) == 1
    assert says in result.output and ".rs:" not in result.output  # no Rust source places
    assert tree_digest(folder) == before


@needs_lancedb
def test_chroma_flag_on_a_lancedb_folder_points_to_store() -> None:
    result = run("inspect-store", "--chroma", str(FOLDER))
    assert result.exit_code == 2
    assert "is a LanceDB store (CrewAI's memory): pass it with --store" in " ".join(
        result.output.split()
    )


@needs_lancedb
def test_a_plain_lancedb_table(tmp_path: Path, model_dir: Path) -> None:
    """A table another library wrote (text column, a metadata struct), made with lancedb
    itself: read from its text column, its duplicates found, its bytes unchanged."""
    from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2

    ef = ONNXMiniLM_L6_V2()
    ef.DOWNLOAD_PATH = model_dir  # type: ignore[assignment]
    texts = ["User lives in Berlin.", "User lives in Berlin.", "User likes jazz."]
    rows = [
        {
            "id": f"doc-{i}",
            "text": t,
            "vector": [float(x) for x in v],
            "metadata": {"user_id": "mia"},
        }
        for i, (t, v) in enumerate(zip(texts, ef(texts), strict=True))
    ]
    import lancedb

    lancedb.connect(str(tmp_path / "db")).create_table("docs", rows)
    report = audit("--user-id", "mia", folder=tmp_path / "db")
    (entry,) = report["stores"]
    assert (entry["layout"]["name"], entry["layout"]["text_from"]) == ("lancedb", "text")
    assert (entry["collection"], entry["records_read"], entry["dimension"]) == ("docs", 3, 384)
    assert ("duplicate", "warning", ["doc-0", "doc-1"]) in findings(report)


@needs_lancedb
def test_a_table_without_text_is_one_line_exit_2(tmp_path: Path) -> None:
    import lancedb

    lancedb.connect(str(tmp_path / "db")).create_table("t", [{"x": 1, "vector": [0.1, 0.2]}])
    result = run("inspect-store", "--store", str(tmp_path / "db"))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "LanceDB table 't' has no text column" in " ".join(result.output.split())


@needs_lancedb
def test_zero_vectors_are_a_problem_line(tmp_path: Path) -> None:
    """CrewAI saves ``[0.0] * dim`` for a record without an embedding: a search ranks it blindly."""
    import lancedb

    def row(i: int, vector: list[float]) -> dict[str, Any]:
        return {
            "id": f"m{i}",
            "content": f"Note {i}",
            "scope": "/",
            "categories_str": "[]",
            "metadata_str": "{}",
            "importance": 0.5,
            "created_at": "2026-01-10T09:00:00",
            "last_accessed": "2026-01-10T09:00:00",
            "source": "",
            "private": False,
            "vector": vector,
        }

    rows = [row(0, [0.6, 0.8]), row(1, [0.0, 0.0])]
    lancedb.connect(str(tmp_path / "memory")).create_table("memories", rows)
    report = audit(folder=tmp_path / "memory")
    (entry,) = report["stores"]
    assert entry["layout"]["name"] == "crewai-memory" and entry["layout"]["tenant_keys"] == []
    assert entry["problems"] == [
        "table 'memories': 1 of 2 records have an all-zero vector (CrewAI writes one when a "
        "record has no embedding): a search ranks them without regard to their text"
    ]
