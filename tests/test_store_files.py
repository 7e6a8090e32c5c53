"""Memory-store files as their libraries write them, through ``inspect-store --store``.

fixtures/stores/: mcp_memory (the MCP reference memory server, driven over stdio MCP:
make_mcp_memory.py), langgraph (SqliteStore and InMemoryStore items: make_langgraph.py), agno
(JsonDb user memories: make_agno.py), crewai (long_term_memory_storage.db: make_crewai.py).
Each asserts its planted findings exactly, and the files' bytes unchanged.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from tests.conftest import FIXTURES
from tests.test_json_contract import validate

STORES = FIXTURES / "stores"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def audit(path: Path, *args: str) -> dict[str, Any]:
    before = digest(path)
    result = run("inspect-store", "--store", str(path), *args, "--format", "json")
    assert result.exit_code == 0, result.output
    assert digest(path) == before  # read-only: the bytes are unchanged
    return validate("inspect-store", result.stdout)  # the published JSON Schema


def findings(report: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return sorted((f["kind"], f["severity"], sorted(f["ids"])) for f in report["findings"])


MIA = "Mia Lopez#"
MCP_FINDINGS = sorted(
    [
        ("conflict", "error", [MIA + "2", MIA + "7"]),  # Berlin, then Lisbon (undated)
        ("conflict", "error", [MIA + "3", MIA + "8"]),  # UTC+1, UTC+0
        ("duplicate", "warning", [MIA + "4", MIA + "6"]),  # the window seat, in other words
        ("strong_fact_in_vector_store", "warning", [MIA + "0"]),  # name
        ("strong_fact_in_vector_store", "warning", [MIA + "1"]),  # allergy
        ("strong_fact_in_vector_store", "warning", [MIA + "3"]),
        ("strong_fact_in_vector_store", "warning", [MIA + "5"]),  # the Kyoto rule
        ("strong_fact_in_vector_store", "warning", [MIA + "8"]),
        ("strong_fact_in_vector_store", "warning", [MIA + "9"]),  # metric units
        ("missing_metadata", "info", sorted([MIA + str(k) for k in range(10)] + ["Tom Becker#0"])),
    ]
)


@pytest.mark.parametrize("name", ["memory.jsonl", "read_graph.json"])
def test_mcp_memory_graph(name: str) -> None:
    report = audit(STORES / "mcp_memory" / name)
    (entry,) = report["stores"]
    assert (entry["type"], entry["mode"], entry["layout"]["name"]) == (
        "store",
        "file",
        "mcp-memory",
    )
    assert entry["records_read"] == 11 and entry["retrieval_checks"] == "skipped"
    assert findings(report) == MCP_FINDINGS
    messages = [f["message"] for f in report["findings"]]
    # the entity is the subject: Mia's cities conflict, Tom's Paris joins nothing
    assert (
        "location of Mia Lopez: the store holds different values: 'Berlin' (undated); "
        "'Lisbon' (undated); without timestamps nothing tells which is current"
    ) in messages
    assert not any("Paris" in m for m in messages)


LG = "memories/mia/"
LANGGRAPH_FINDINGS = sorted(
    [
        ("conflict", "error", [LG + "home", LG + "home-new"]),
        ("conflict", "error", [LG + "tz", LG + "tz-new"]),
        ("stale", "warning", [LG + "home"]),
        ("stale", "warning", [LG + "tz"]),
        ("duplicate", "warning", [LG + "seat", LG + "seat-dup"]),  # the same text
        ("duplicate", "warning", [LG + "seat", LG + "seat-para"]),  # the same claim
        ("strong_fact_in_vector_store", "warning", [LG + "name"]),
        ("strong_fact_in_vector_store", "warning", [LG + "allergy"]),
        ("strong_fact_in_vector_store", "warning", [LG + "tz"]),
        ("strong_fact_in_vector_store", "warning", [LG + "tz-new"]),
        ("strong_fact_in_vector_store", "warning", [LG + "kyoto-rule"]),
        (
            "missing_metadata",
            "info",
            sorted(
                [LG + k for k in ("allergy", "home", "seat", "seat-dup", "seat-para", "home-new")]
                + ["memories/tom/tom-home"]
            ),
        ),
    ]
)


@pytest.mark.parametrize(
    ("name", "layout"), [("items.json", "langgraph-items"), ("store.db", "langgraph-sqlite")]
)
def test_langgraph_store(name: str, layout: str) -> None:
    report = audit(STORES / "langgraph" / name)
    (entry,) = report["stores"]
    assert entry["layout"]["name"] == layout and entry["records_read"] == 11
    assert findings(report) == LANGGRAPH_FINDINGS
    # Tom ("memories", "tom") is another tenant: his Paris is no conflict of Mia's
    assert not any("Paris" in f["message"] for f in report["findings"])
    scoped = audit(STORES / "langgraph" / name, "--user-id", "tom")
    assert scoped["stores"][0]["records_read"] == 1 and scoped["stores"][0]["out_of_scope"] == 10


def test_langgraph_sqlite_leaves_no_journal_beside_it(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    shutil.copy(STORES / "langgraph" / "store.db", db)
    audit(db)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.db"]


def test_agno_memories() -> None:
    report = audit(STORES / "agno" / "agno_memories.json")
    (entry,) = report["stores"]
    assert entry["layout"]["name"] == "agno" and entry["records_read"] == 8
    assert findings(report) == sorted(
        [
            ("conflict", "error", ["m3", "m6"]),  # Berlin (first upsert), Lisbon (a second later)
            ("stale", "warning", ["m3"]),
            ("duplicate", "warning", ["m4", "m5"]),
            ("strong_fact_in_vector_store", "warning", ["m1"]),
            ("strong_fact_in_vector_store", "warning", ["m2"]),
            ("strong_fact_in_vector_store", "warning", ["m8"]),
            ("missing_metadata", "info", [f"m{k}" for k in range(1, 9)]),
        ]
    )
    # a directory holding the library's file is read as that file
    assert findings(audit(STORES / "agno" / "agno_memories.json")) == findings(
        json.loads(run("inspect-store", "--store", str(STORES / "agno"), "-f", "json").stdout)
    )


def test_facts_file_flag_is_unchanged_for_these_files() -> None:
    result = run("inspect-store", "--facts-file", str(STORES / "mcp_memory" / "memory.jsonl"))
    assert result.exit_code == 2 and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"name": "Mia", "city": "Lisbon"}', "pass it with --facts-file"),
        (b'{"type": "entity", "name": "x"}\n{not json', "line 2: not JSON"),
        (b'[{"namespace": ["m", "u"], "key": "k", "value": {"n": 1}}]', "[0]: value has no text"),
        (b'[{"memory": 3, "topics": []}]', "[0]: an Agno memory needs a string 'memory'"),
        (b"SQLite format 3\x00" + b"\x00" * 200, "not a readable SQLite database"),
        (b"\xff\xfe\x00garbage", "neither a SQLite database nor UTF-8 JSON"),
    ],
)
def test_bad_files_are_one_line_exit_2(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(content)
    result = run("inspect-store", "--store", str(path))
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output
    assert path.read_bytes() == content


def test_chroma_directory_given_to_store_says_use_chroma() -> None:
    result = run("inspect-store", "--store", str(STORES / "langchain"))
    assert result.exit_code == 2 and "pass it with --chroma" in result.output


def test_crewai_memory_folder() -> None:
    """CrewAI 1.9's memory folder: Chroma (entities, short_term) beside the long-term SQLite."""
    folder = STORES / "crewai"
    ltm = folder / "long_term_memory_storage.db"
    from tests.test_real_stores import tree_digest

    before = tree_digest(folder)
    report = audit(ltm)
    (entry,) = report["stores"]
    assert entry["layout"]["name"] == "crewai-ltm" and entry["records_read"] == 6
    assert findings(report) == sorted(
        [
            ("conflict", "error", ["ltm-1#0", "ltm-2#0"]),  # Mia: Berlin, then (a run later) Lisbon
            ("stale", "warning", ["ltm-1#0"]),
            ("duplicate", "warning", ["ltm-1#1", "ltm-2#1"]),  # the window seat, in other words
            ("strong_fact_in_vector_store", "warning", ["ltm-1#2"]),  # metric units
            ("missing_metadata", "info", [f"ltm-{r}#{k}" for r in (1, 2) for k in range(3)]),
        ]
    )
    conflict = next(f for f in report["findings"] if f["kind"] == "conflict")
    assert conflict["message"].startswith("location of Mia (agent_id=Travel agent):")
    assert "Paris" not in conflict["message"]  # Tom Becker's city is his

    # the same folder through --chroma and --store together: both parts, one report
    both = json.loads(
        run("inspect-store", "--chroma", str(folder), "--store", str(folder), "-f", "json").stdout
    )
    assert [(s["type"], s.get("collection") or s["location"]) for s in both["stores"]] == [
        ("chroma", "memory_entities"),
        ("chroma", "memory_short_term"),
        ("store", "long_term_memory_storage.db"),
    ]
    entity = [f for f in both["findings"] if f["collection"] == "memory_entities"]
    # "Mia Lopez(Person): A traveler who lives in Berlin and is allergic to peanuts"
    assert sorted(
        f["message"].split(" lives only")[0]
        for f in entity
        if f["kind"] == "strong_fact_in_vector_store"
    ) == [
        "strong fact allergy = 'peanuts' about Mia Lopez",
        "strong fact name = 'Mia Lopez' about Mia Lopez",
        "strong fact name = 'Tom Becker' about Tom Becker",
    ]
    short = [
        (f["kind"], len(f["ids"]))
        for f in both["findings"]
        if f["collection"] == "memory_short_term"
    ]
    assert sorted(short) == [
        ("duplicate", 2),
        ("missing_metadata", 3),
        ("strong_fact_in_vector_store", 1),
    ]
    assert tree_digest(folder) == before


def test_mem0_on_qdrant_local_mode() -> None:
    """mem0's default vector store, Qdrant's local mode (make_mem0_qdrant.py): read through a
    copy with qdrant-client (the optional extra memdiag[qdrant]), the same audit as Chroma."""
    pytest.importorskip("qdrant_client", reason="qdrant-client (memdiag[qdrant]) not installed")
    from tests.test_real_stores import tree_digest

    folder = STORES / "mem0_qdrant"
    before = tree_digest(folder)
    report = validate(
        "inspect-store",
        run("inspect-store", "--store", str(folder), "--user-id", "mia", "-f", "json").stdout,
    )
    (entry,) = report["stores"]
    assert (entry["type"], entry["collection"], entry["layout"]["name"]) == (
        "qdrant",
        "mem0",
        "mem0",
    )
    assert (entry["dimension"], entry["space"], entry["records_read"]) == (384, "cosine", 16)
    assert entry["out_of_scope"] == 3
    from memdiag.stores.documents import open_store
    from memdiag.stores.layouts import ReadOptions, Scope

    with open_store(str(folder), ReadOptions(Scope(user_id="mia"))) as store:
        data = store.memories("mem0").data
    by_text: dict[str, list[str]] = {}
    for i, d in zip(data.ids, data.documents, strict=True):
        by_text.setdefault(d or "", []).append(i)

    def ids(*texts: str) -> list[str]:
        return sorted(i for t in texts for i in by_text[t])

    seat = "Prefers window seats on long flights"
    got = [f for f in findings(report) if f[0] != "missing_metadata"]
    assert got == sorted(
        [
            ("conflict", "error", ids("Lives in Berlin", "Moved to Lisbon")),
            ("conflict", "error", ids("Time zone is UTC+1", "Time zone is UTC+0")),
            ("stale", "warning", ids("Lives in Berlin")),
            ("stale", "warning", ids("Time zone is UTC+1")),
            ("duplicate", "warning", ids(seat)),  # written twice
            (
                "duplicate",
                "warning",
                sorted([by_text[seat][0], *by_text["Likes a window seat on long flights"]]),
            ),
            ("strong_fact_in_vector_store", "warning", ids("Name is Mia")),
            ("strong_fact_in_vector_store", "warning", ids("Is allergic to peanuts")),
            ("strong_fact_in_vector_store", "warning", ids("Time zone is UTC+1")),
            ("strong_fact_in_vector_store", "warning", ids("Time zone is UTC+0")),
            (
                "strong_fact_in_vector_store",
                "warning",
                ids("Never book Kyoto hotels next to the train station"),
            ),
            (
                "near_duplicate",
                "info",
                sorted(
                    [
                        by_text[seat][0],
                        *by_text["Prefers window seats on all long flights"],
                        *by_text["Likes a window seat on long flights"],
                    ]
                ),
            ),
        ]
    )
    # the vectors are there: the model is identified from them, and diagnose queries with it
    # (tests/test_store_diagnose.py)
    reason = entry["retrieval_reason"]
    if "not installed" in reason:
        assert entry["retrieval_checks"] == "skipped"
    else:
        assert reason.startswith("vectors reproduced by all-MiniLM-L6-v2: 5/5 records")
        assert entry["retrieval_checks"] == "available"
    assert tree_digest(folder) == before


def test_qdrant_without_the_extra_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "qdrant_client", None)  # import fails as if absent
    result = run("inspect-store", "--store", str(STORES / "mem0_qdrant"))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "needs qdrant-client (pip install 'memdiag[qdrant]')" in " ".join(result.output.split())


def test_check_max_findings_on_a_store_file(tmp_path: Path) -> None:
    spec = tmp_path / "checks.yaml"
    graph = STORES / "mcp_memory" / "memory.jsonl"
    spec.write_text(
        f"""version: 1
cases:
  - name: the MCP graph holds no conflicts
    transcript: {STORES / "conversation.jsonl"}
    store: {{memory_store: {graph}}}
    expect:
      - max_findings: {{conflict: 0, duplicate: 1}}
""",
        encoding="utf-8",
    )
    before = digest(graph)
    result = run("check", str(spec), "--format", "json")
    assert result.exit_code == 1, result.output
    (case,) = json.loads(result.stdout)["cases"]
    assert [f.split(":")[0] for f in case["failures"]] == ["max_findings conflict ≤ 0"]
    assert "found 2" in case["failures"][0]  # Mia's cities and time zones
    assert digest(graph) == before
