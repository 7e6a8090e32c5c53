"""`diagnose --store`: the long-term verdict of each memory store memdiag reads, as its library
retrieves (docs/stores.md#diagnose-on-memory-store-files).

Whole stacks: fixtures/stores/conversation.jsonl (Mia told her travel agent her allergy, her
city, her seat, her dog's name and a Kyoto rule in January and June; in November the agent
forgets five of them) against each real store of fixtures/stores/, each written by its own
library (make_*.py). Every verdict is asserted exactly, the JSON against the published schema,
the stores' bytes before and after.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memdiag.cli import app
from tests.conftest import FIXTURES
from tests.test_json_contract import validate
from tests.test_real_stores import tree_digest

STORES = FIXTURES / "stores"
CONVERSATION = STORES / "conversation.jsonl"
ALLERGY, LISBON, SEAT, DOG, KYOTO = 6, 7, 8, 9, 10  # the turns of the five forgot markers


def diagnose(store: Path, *args: str, config: str | None = None, tmp: Path | None = None) -> Any:
    """``diagnose --store STORE ARGS -f json`` through the CLI; the store's bytes unchanged."""
    before = tree_digest(store) if store.is_dir() else {"": store.read_bytes()}
    argv = ["diagnose", str(CONVERSATION), "--store", str(store), *args, "--format", "json"]
    if config is not None:
        assert tmp is not None
        path = tmp / "memdiag.yaml"
        path.write_text(config, encoding="utf-8")
        argv += ["--config", str(path)]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    after = tree_digest(store) if store.is_dir() else {"": store.read_bytes()}
    assert after == before  # read-only
    out = validate("diagnose", result.stdout)  # the published JSON Schema
    return {d["at_turn"]: d for d in out["diagnoses"]}


def verdicts(ds: dict[int, Any]) -> dict[int, str]:
    return {t: d["verdict"] for t, d in ds.items()}


def memory(d: dict[str, Any]) -> dict[str, Any]:
    return d["details"]["memory_store"]


# --- Qdrant local mode (mem0's default): queried as mem0 searches ---------------------------------


def test_mem0_on_qdrant_gets_the_verdicts_of_mem0_on_chroma(
    tmp_path: Path, model_dir: Path
) -> None:
    """The same memories as fixtures/stores/mem0 (Chroma), so the same five verdicts: each
    query embedded with the identified MiniLM, ranked by qdrant-client, one user's points."""
    pytest.importorskip("qdrant_client", reason="qdrant-client (memdiag[qdrant]) not installed")
    left = set(Path(tempfile.gettempdir()).glob("memdiag-qdrant-*"))
    ds = diagnose(
        STORES / "mem0_qdrant",
        "--user-id",
        "mia",
        "--top-k",
        "3",
        config="store:\n  inject_max_tokens: 120\n",
        tmp=tmp_path,
    )
    assert verdicts(ds) == {
        ALLERGY: "long_term_not_retrieved",  # snack and seat memories outrank it
        LISBON: "long_term_stale",  # Lisbon at rank 1, Berlin (same key, January) at rank 2
        SEAT: "in_context",
        DOG: "long_term_not_written",
        KYOTO: "long_term_not_injected",  # the long Kyoto note at rank 1 fills the budget
    }
    assert ds[ALLERGY]["details"]["retrieval"]["rank"] > 3
    assert "strong_fact_in_vector_store" in ds[ALLERGY]["flags"]
    lisbon = ds[LISBON]["details"]
    assert lisbon["vector_store"]["document"] == "Moved to Lisbon"
    assert [
        (c["document"], c["field"], c["value"], c["older"])
        for c in lisbon["retrieval"]["contradicting"]
    ] == [("Lives in Berlin", "location", "berlin", True)]
    assert lisbon["stores_checked"] == [f"qdrant store {STORES / 'mem0_qdrant'}"]
    assert ds[SEAT]["details"]["retrieval"]["rank"] == 1
    assert ds[KYOTO]["details"]["retrieval"]["rank"] == 2
    # Tom's points are filtered out of every query, as mem0 filters its search by user_id
    from memdiag.stores.documents import open_store
    from memdiag.stores.layouts import ReadOptions, Scope

    with open_store(str(STORES / "mem0_qdrant"), ReadOptions(Scope(user_id="tom"))) as tom:
        toms = set(tom.memories("mem0").data.ids)
    ranked = {
        h["id"] for d in ds.values() for h in d["details"].get("retrieval", {}).get("top", [])
    }
    assert len(toms) == 2 and ranked and not ranked & toms
    # the temporary copy the client opened is gone
    assert set(Path(tempfile.gettempdir()).glob("memdiag-qdrant-*")) == left


def test_qdrant_retrieval_ranks_one_tenant_only(model_dir: Path) -> None:
    pytest.importorskip("qdrant_client", reason="qdrant-client (memdiag[qdrant]) not installed")
    from memdiag.stores.documents import open_store
    from memdiag.stores.layouts import ReadOptions, Scope

    with open_store(str(STORES / "mem0_qdrant"), ReadOptions(Scope(user_id="tom"))) as store:
        hits = store.query("mem0", "Which city do I live in?", 10)
    assert [h.document for h in hits] == ["Lives in Paris", "Is allergic to shellfish"]
    assert [h.rank for h in hits] == [1, 2] and hits[0].distance < hits[1].distance


def test_qdrant_without_a_model_is_unchecked_and_says_what_fits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("qdrant_client", reason="qdrant-client (memdiag[qdrant]) not installed")
    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", "/nonexistent")
    monkeypatch.setenv("HOME", str(tmp_path))  # nor in Chroma's cache
    ds = diagnose(STORES / "mem0_qdrant", "--user-id", "mia")
    assert ds[SEAT]["verdict"] == "long_term_unchecked"
    reason = ds[SEAT]["details"]["skipped_reason"]
    assert reason.startswith("Qdrant keeps no embedding model; re-embedding stored documents:")
    assert "--embedding-function default" in reason
    assert ds[DOG]["verdict"] == "long_term_not_written"


@pytest.mark.parametrize("scope", [("--user-id", "mia"), ()])
def test_crewai_lancedb_memory_gets_the_verdicts_of_chroma(
    scope: tuple[str, ...], tmp_path: Path, model_dir: Path
) -> None:
    """CrewAI ≥ 1.10's LanceDB memory (make_crewai_lancedb.py), searched as its LanceDBStorage
    searches: LanceDB's own ranks and squared-L2 distances; Tom's rows ("source" tom) never
    contradict Mia's, scoped or not."""
    pytest.importorskip("lancedb", reason="lancedb (memdiag[lancedb]) not installed")
    folder = STORES / "crewai_lancedb"
    ds = diagnose(
        folder, *scope, "--top-k", "3", config="store:\n  inject_max_tokens: 120\n", tmp=tmp_path
    )
    assert verdicts(ds) == {
        ALLERGY: "long_term_not_retrieved",
        LISBON: "long_term_stale",  # Berlin (January) outranks Lisbon (June)
        SEAT: "in_context",
        DOG: "long_term_not_written",
        KYOTO: "long_term_not_injected",
    }
    lisbon = ds[LISBON]["details"]
    assert lisbon["vector_store"]["document"] == "Mia moved to Lisbon."
    assert [
        (c["document"], c["older"], c["rank"]) for c in lisbon["retrieval"]["contradicting"]
    ] == [("Mia lives in Berlin.", True, 1)]
    assert lisbon["stores_checked"] == [f"lancedb store {folder}"]
    assert ds[SEAT]["details"]["retrieval"]["rank"] == 1


def test_lancedb_search_keeps_the_tenants_own_rows(model_dir: Path) -> None:
    pytest.importorskip("lancedb", reason="lancedb (memdiag[lancedb]) not installed")
    from memdiag.stores.documents import open_store
    from memdiag.stores.layouts import ReadOptions, Scope

    folder = str(STORES / "crewai_lancedb")
    with open_store(folder, ReadOptions(Scope(user_id="tom"))) as store:
        hits = store.query("memories", "Which city do I live in?", 5)
    assert [h.document for h in hits] == ["Tom lives in Paris.", "Tom is allergic to shellfish."]
    assert [h.rank for h in hits] == [1, 2] and hits[0].distance < hits[1].distance


# --- Agno: every memory of the user in the system prompt ----------------------------------------


def test_agno_injects_every_memory_of_the_user() -> None:
    ds = diagnose(STORES / "agno" / "agno_memories.json")
    assert verdicts(ds) == {
        ALLERGY: "in_context",
        LISBON: "long_term_stale",  # Berlin is in the prompt beside Lisbon
        SEAT: "in_context",
        DOG: "long_term_not_written",
        KYOTO: "in_context",
    }
    seat = memory(ds[SEAT])
    assert (seat["id"], seat["retrieved"], seat["delivered"]) == ("m4", True, 7)  # not Tom's m7
    assert seat["retrieved_by"].startswith("Agno's add_memories_to_context")
    lisbon = memory(ds[LISBON])
    assert [(c["id"], c["value"], c["older"]) for c in lisbon["contradicting"]] == [
        ("m3", "berlin", True)  # updated_at a second earlier
    ]
    assert "Paris" not in " ".join(ds[LISBON]["fixes"])  # Tom (user_id=tom) is not Mia
    # the allergy is a strong fact: a memory-store file is no exact-key lookup either, and the
    # fix names the store's own retrieval, not vector similarity
    allergy = ds[ALLERGY]
    assert "strong_fact_in_memory_store" in allergy["flags"]
    assert "strong_fact_in_vector_store" not in allergy["flags"]
    assert any("not only by Agno's add_memories_to_context" in f for f in allergy["fixes"])


# --- the MCP memory server: the agent's own tool call ---------------------------------------------


@pytest.mark.parametrize("name", ["memory.jsonl", "read_graph.json"])
def test_mcp_graph_without_the_agents_query_is_unchecked(name: str) -> None:
    ds = diagnose(STORES / "mcp_memory" / name)
    assert verdicts(ds) == {
        ALLERGY: "long_term_unchecked",
        LISBON: "long_term_unchecked",
        SEAT: "long_term_unchecked",
        DOG: "long_term_not_written",
        KYOTO: "long_term_unchecked",
    }
    lisbon = memory(ds[LISBON])
    assert (lisbon["id"], lisbon["retrieved"]) == ("Mia Lopez#7", None)
    # no dates in the graph: the earlier observation is the older one
    assert [(c["id"], c["older"]) for c in lisbon["contradicting"]] == [("Mia Lopez#2", True)]
    said = " ".join(ds[LISBON]["fixes"])
    assert "appends observations in order" in said and "store.query" in said


def test_mcp_graph_with_the_search_nodes_query(tmp_path: Path) -> None:
    """search_nodes("mia") matches the entity's name (case-insensitive) and returns it whole."""
    ds = diagnose(
        STORES / "mcp_memory" / "memory.jsonl", config="store:\n  query: mia\n", tmp=tmp_path
    )
    assert verdicts(ds) == {
        ALLERGY: "in_context",
        LISBON: "long_term_stale",  # "Lives in Berlin" comes with "Moved to Lisbon"
        SEAT: "in_context",
        DOG: "long_term_not_written",
        KYOTO: "in_context",
    }
    assert memory(ds[SEAT])["retrieved_by"] == "search_nodes('mia')"
    assert memory(ds[SEAT])["delivered"] == 10  # Mia Lopez's ten observations


def test_mcp_graph_query_that_matches_nothing_is_not_retrieved(tmp_path: Path) -> None:
    ds = diagnose(
        STORES / "mcp_memory" / "memory.jsonl",
        config="store:\n  query: Which seat should I pick?\n",
        tmp=tmp_path,
    )
    assert ds[SEAT]["verdict"] == "long_term_not_retrieved"
    assert "case-insensitive substring" in ds[SEAT]["fixes"][0]


# --- LangGraph: store.search by namespace, no query ranking without an index --------------------


def test_langgraph_sqlite_lists_the_namespace_newest_first() -> None:
    ds = diagnose(STORES / "langgraph" / "store.db", "--top-k", "3")
    assert verdicts(ds) == {
        ALLERGY: "long_term_not_retrieved",  # written in January: item 5 of Mia's 10
        LISBON: "in_context",  # written last: among the 3 newest, Berlin is not
        SEAT: "long_term_not_retrieved",
        DOG: "long_term_not_written",
        KYOTO: "long_term_not_retrieved",
    }
    assert (memory(ds[ALLERGY])["rank"], memory(ds[LISBON])["rank"]) == (5, 2)
    assert "ORDER BY updated_at DESC" in ds[ALLERGY]["fixes"][0]
    wide = diagnose(STORES / "langgraph" / "store.db", "--top-k", "10")
    assert verdicts(wide)[ALLERGY] == "in_context"
    assert wide[LISBON]["verdict"] == "long_term_stale"  # all ten listed: Berlin too
    assert [(c["id"], c["older"]) for c in memory(wide[LISBON])["contradicting"]] == [
        ("memories/mia/home", True)
    ]  # Tom's namespace ("memories", "tom") is never listed with Mia's


def test_langgraph_items_keep_the_order_of_the_dump() -> None:
    ds = diagnose(STORES / "langgraph" / "items.json", "--top-k", "3")
    assert verdicts(ds)[ALLERGY] == "in_context"  # InMemoryStore lists in insertion order
    assert memory(ds[LISBON])["rank"] == 9 and ds[LISBON]["verdict"] == "long_term_not_retrieved"


def test_langgraph_store_with_an_index_is_unchecked(tmp_path: Path) -> None:
    """A SqliteStore created with ``index=`` ranks by an embedding memdiag does not query."""
    db = tmp_path / "store.db"
    shutil.copy(STORES / "langgraph" / "store.db", db)
    con = sqlite3.connect(db)
    # LangGraph's own table for an indexed store (langgraph/store/sqlite/base.py)
    con.execute(
        "CREATE TABLE store_vectors (prefix text, key text, field_name text, embedding BLOB, "
        "created_at timestamp, updated_at timestamp, PRIMARY KEY (prefix, key, field_name))"
    )
    con.execute("INSERT INTO store_vectors VALUES ('memories.mia', 'seat', '$', x'00', 0, 0)")
    con.commit()
    con.close()
    ds = diagnose(db)
    assert ds[SEAT]["verdict"] == "long_term_unchecked"
    assert "vector index (1 rows in store_vectors)" in ds[SEAT]["fixes"][0]


# --- CrewAI long-term memory: by the exact task description ---------------------------------------


def test_crewai_ltm_needs_the_task_description() -> None:
    ds = diagnose(STORES / "crewai" / "long_term_memory_storage.db")
    assert verdicts(ds)[SEAT] == "long_term_unchecked"
    assert "Plan Mia's December trip" in ds[SEAT]["fixes"][0]
    assert verdicts(ds)[DOG] == "long_term_not_written"


def test_crewai_ltm_by_task(tmp_path: Path) -> None:
    ltm = STORES / "crewai" / "long_term_memory_storage.db"
    ds = diagnose(ltm, config="store:\n  query: Plan Mia's December trip\n", tmp=tmp_path)
    assert ds[SEAT]["verdict"] == "in_context"  # a suggestion of that task's run
    # Lisbon was learned by another task: CrewAI matches descriptions exactly
    assert ds[LISBON]["verdict"] == "long_term_not_retrieved"
    assert "exact task description" in ds[LISBON]["fixes"][0]


def test_crewai_ltm_runs_of_one_task_deliver_berlin_with_lisbon(tmp_path: Path) -> None:
    """Both runs of one task are read (latest_n=2): the newer Lisbon comes with Berlin."""
    db = tmp_path / "long_term_memory_storage.db"
    shutil.copy(STORES / "crewai" / "long_term_memory_storage.db", db)
    con = sqlite3.connect(db)
    con.execute("UPDATE long_term_memories SET task_description = 'Plan Mia''s December trip'")
    con.commit()
    con.close()
    ds = diagnose(db, config="store:\n  query: Plan Mia's December trip\n", tmp=tmp_path)
    assert ds[LISBON]["verdict"] == "long_term_stale"
    assert [(c["id"], c["older"]) for c in memory(ds[LISBON])["contradicting"]] == [
        ("ltm-1#0", True)
    ]
    assert "Paris" not in " ".join(ds[LISBON]["fixes"])  # Tom Becker's city is his


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.integers(0, 50), st.text("0123456789.", min_size=1, max_size=4)),
            st.one_of(st.none(), st.floats(0, 10, allow_nan=False)),
        ),
        min_size=1,
        max_size=6,
        unique_by=lambda r: (type(r[0]).__name__, r[0]),
    )
)
def test_crewai_latest_runs_are_the_rows_sqlite_returns(rows: list[tuple[Any, Any]]) -> None:
    """``_latest_runs`` is CrewAI's ``ORDER BY datetime DESC, score ASC LIMIT 2``, run by SQLite."""
    from memdiag.diagnosis.store_files import _latest_runs
    from memdiag.stores.records import MemoryRecord

    con = sqlite3.connect(":memory:")
    # CrewAI 1.9's table (ltm_sqlite_storage.py)
    con.execute(
        "CREATE TABLE long_term_memories (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "task_description TEXT, metadata TEXT, datetime TEXT, score REAL)"
    )
    for when, score in rows:
        con.execute(
            "INSERT INTO long_term_memories (task_description, metadata, datetime, score) "
            "VALUES ('t', '{}', ?, ?)",
            (when, score),
        )
    got = con.execute(
        "SELECT id, datetime, score FROM long_term_memories WHERE task_description = 't' "
        "ORDER BY datetime DESC, score ASC LIMIT 2"
    ).fetchall()
    records = [
        MemoryRecord(f"ltm-{rid}#0", "x", {"datetime": when, "score": score}, None, "c")
        for rid, when, score in con.execute("SELECT id, datetime, score FROM long_term_memories")
    ]
    con.close()
    assert _latest_runs(records) == [f"ltm-{rid}" for rid, _w, _s in got]


# --- stores together, checks, bad input ---------------------------------------------------------


def test_store_combines_with_chroma_and_a_facts_file(tmp_path: Path, model_dir: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"dog": "called Rex"}', encoding="utf-8")
    ds = diagnose(
        STORES / "agno" / "agno_memories.json",
        "--chroma",
        str(STORES / "chroma"),
        "--facts-file",
        str(facts),
        "--top-k",
        "3",
    )
    checked = ds[SEAT]["details"]["stores_checked"]
    assert [c.split(" ")[0] for c in checked] == ["facts", "chroma", "agno"]
    assert ds[DOG]["verdict"] == "in_context"  # the facts file holds the dog's name
    # Chroma ranks the allergy below top_k=3, Agno injects it: a store that delivers it wins
    assert ds[ALLERGY]["verdict"] == "in_context"
    assert ds[ALLERGY]["details"]["vector_store"]["found"] is True
    assert memory(ds[ALLERGY])["retrieved"] is True


def test_check_case_diagnoses_a_memory_store(tmp_path: Path) -> None:
    spec = tmp_path / "checks.yaml"
    spec.write_text(
        f"""version: 1
cases:
  - name: Agno keeps Berlin beside Lisbon
    transcript: {CONVERSATION}
    store: {{memory_store: {STORES / "agno" / "agno_memories.json"}}}
    expect:
      - verdict: long_term_stale
        fact: "I moved to Lisbon"
  - name: the MCP graph returns Mia's entity for search_nodes("Mia")
    transcript: {CONVERSATION}
    store: {{memory_store: {STORES / "mcp_memory" / "memory.jsonl"}, query: Mia}}
    expect:
      - verdict: in_context
        fact: "prefer window seats on long flights"
""",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["check", str(spec), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [c["passed"] for c in validate("check", result.stdout)["cases"]] == [True, True]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"name": "Mia", "city": "Lisbon"}', "pass it with --facts-file"),
        (b'{"type": "entity", "name": "x"}\n{not json', "line 2: not JSON"),
    ],
)
def test_diagnose_bad_store_is_one_line_exit_2(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(content)
    result = CliRunner().invoke(app, ["diagnose", str(CONVERSATION), "--store", str(path)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert path.read_bytes() == content


def test_diagnose_missing_store_is_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    result = CliRunner().invoke(app, ["diagnose", str(CONVERSATION), "--store", str(missing)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert not missing.exists()


def test_qdrant_points_with_sparse_vectors_say_the_ranking_is_dense_only(tmp_path: Path) -> None:
    """Current mem0 writes a BM25 sparse vector beside the dense one and adds its scores to the
    search: memdiag reads the dense vector and says it ranks by it alone."""
    pytest.importorskip("qdrant_client", reason="qdrant-client (memdiag[qdrant]) not installed")
    from qdrant_client import QdrantClient, models

    from memdiag.stores.documents import open_store

    def mem0(text: str) -> dict[str, str]:  # the payload mem0 writes
        return {"data": text, "hash": hashlib.md5(text.encode()).hexdigest(), "user_id": "mia"}

    folder = tmp_path / "qdrant"
    client = QdrantClient(path=str(folder))
    client.create_collection(
        "mem0",
        vectors_config=models.VectorParams(size=3, distance=models.Distance.COSINE),
        sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
    )
    sparse = models.SparseVector(indices=[7], values=[0.5])
    client.upsert(
        "mem0",
        [
            models.PointStruct(
                id=1,
                vector={"": [1.0, 0.0, 0.0], "bm25": sparse},
                payload=mem0("Lives in Lisbon"),
            ),
            models.PointStruct(id=2, vector=[0.0, 1.0, 0.0], payload=mem0("Likes tea")),
        ],
    )
    client.close()
    with open_store(str(folder)) as store:
        data = store.memories("mem0").data
        assert data.embeddings is not None and data.embeddings.shape == (2, 3)
        (line,) = store.problems()
        hits = store.query_embedding("mem0", [0.0, 1.0, 0.0], 2)
    assert "1 points carry sparse vectors" in line and "dense vectors only" in line
    assert [(h.document, h.rank) for h in hits] == [("Likes tea", 1), ("Lives in Lisbon", 2)]
    assert hits[0].distance == pytest.approx(0.0) and hits[1].distance == pytest.approx(1.0)


def test_the_schema_names_every_layout_diagnose_retrieves() -> None:
    import json

    from memdiag.diagnosis.store_files import RETRIEVAL

    schema = json.loads((FIXTURES.parent / "memdiag/schemas/diagnose.schema.json").read_text())
    layouts = schema["$defs"]["details"]["properties"]["memory_store"]["properties"]["layout"]
    assert sorted(layouts["enum"]) == sorted(RETRIEVAL)


def test_mcp_default_user_entity_is_the_user(tmp_path: Path) -> None:
    """The server's README prompt files the user as entity "default_user"; Tom's entity is his."""
    graph = tmp_path / "memory.jsonl"
    lines = [
        {
            "type": "entity",
            "name": "default_user",
            "entityType": "person",
            "observations": ["Prefers window seats on long flights"],
        },
        {
            "type": "entity",
            "name": "Tom Becker",
            "entityType": "person",
            "observations": ["Is allergic to peanuts"],
        },
    ]
    graph.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    ds = diagnose(graph, config="store:\n  query: default_user\n", tmp=tmp_path)
    assert ds[SEAT]["verdict"] == "in_context"
    assert ds[ALLERGY]["verdict"] == "long_term_not_written"  # Tom's allergy is not Mia's


def test_console_names_the_store_and_its_retrieval() -> None:
    result = CliRunner().invoke(
        app,
        [
            "diagnose",
            str(CONVERSATION),
            "--store",
            str(STORES / "agno"),
            "--fact",
            "I moved to Lisbon",
            "--at",
            "7",
        ],
        env={"COLUMNS": "120"},
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "record m6 (agno) holds it" in text
    assert "comes with m3 (older): location = 'berlin'" in text
