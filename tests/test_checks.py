"""`memdiag check`: spec parsing with line numbers, expectations, renderers, --jobs, exit codes."""

from __future__ import annotations

import json
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memdiag.checks import FINDING_KINDS, check, load_spec
from memdiag.cli import app
from memdiag.errors import InputError
from tests.conftest import FIXTURES

runner = CliRunner()
DEMO = FIXTURES / "demo.jsonl"

HOLDING = """\
version: 1
defaults: {model: gpt-4o, strategy: {name: sliding_window, budget: 400}}
cases:
  - name: allergy evicted
    transcript: demo.jsonl
    expect:
      - kept: "allergic to peanuts"
        at_turn: 5
      - lost: "allergic to peanuts"
        at_turn: 8
  - name: marked failures
    transcript: demo.jsonl
    expect:
      - verdict: short_term_dropped
        fact: "allergic to peanuts"
      - in_layer: long_term
        fact: "prefers window seats"
  - name: scratchpad pins it
    transcript: demo.jsonl
    strategy: {name: scratchpad, budget: 400}
    expect:
      - kept: "allergic to peanuts"
        at_turn: 8
        kept_by: pinned
"""
NAMES = ["allergy evicted", "marked failures", "scratchpad pins it"]


def write_spec(tmp_path: Path, text: str, name: str = "checks.yaml") -> Path:
    """The spec and a copy of the demo transcript beside it (paths resolve from the spec)."""
    shutil.copy(DEMO, tmp_path / "demo.jsonl")
    spec = tmp_path / name
    spec.write_text(textwrap.dedent(text), encoding="utf-8")
    return spec


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["check", *args])


def test_holding_spec_exits_0(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, HOLDING)
    r = invoke(str(spec))
    assert r.exit_code == 0, r.output
    assert r.stdout.count("✓") == 3
    assert "3 passed, 0 failed" in r.stdout


def test_flipped_expectation_exits_1_with_one_failing_junit_case(tmp_path: Path) -> None:
    flipped = HOLDING.replace('- lost: "allergic to peanuts"', '- kept: "allergic to peanuts"')
    spec = write_spec(tmp_path, flipped)
    junit = tmp_path / "report.xml"
    r = invoke(str(spec), "--junit", str(junit))
    assert r.exit_code == 1, r.output
    reason = (
        "kept 'allergic to peanuts' at turn 8 under sliding_window (budget 400): "
        "lost at turn 6 (evicted)"
    )
    assert reason in r.stdout
    assert "line 9:" in r.stdout  # the flipped expectation's line

    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["memdiag"]
    cases = suites[0].findall("testcase")
    assert [c.get("name") for c in cases] == NAMES
    assert all(float(c.get("time", "x")) >= 0 and c.get("classname") for c in cases)
    failing = [c for c in cases if c.find("failure") is not None]
    assert len(failing) == 1 and failing[0].get("name") == "allergy evicted"
    failure = failing[0].find("failure")
    assert failure is not None
    assert reason in (failure.get("message") or "")
    assert reason in (failure.text or "")
    assert suites[0].get("tests") == "3" and suites[0].get("failures") == "1"


def test_typo_key_names_file_and_line(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, HOLDING.replace("      - lost:", "      - lsot:"))
    r = invoke(str(spec))
    assert r.exit_code == 2
    assert f"{spec}:9: unknown key 'lsot' (did you mean 'lost'?)" in r.stderr
    assert r.stdout == ""

    spec = write_spec(tmp_path, HOLDING.replace("      - kept:", "      - kep:", 1))
    r = invoke(str(spec))
    assert r.exit_code == 2
    assert f"{spec}:7: unknown key 'kep' (did you mean 'kept'?)" in r.stderr


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("budget: 400}}", "budget: lots}}", 2, "strategy.budget must be an integer, got a string"),
        (
            "verdict: short_term_dropped",
            "verdict: short_term_droped",
            14,
            "unknown verdict 'short_term_droped' (did you mean 'short_term_dropped'?)",
        ),
        ("in_layer: long_term", "in_layer: longterm", 16, "unknown in_layer 'longterm'"),
        (
            "transcript: demo.jsonl\n    strategy",
            "transcript: nope.jsonl\n    strategy",
            19,
            "transcript: no such file 'nope.jsonl'",
        ),
        ("{name: scratchpad, budget: 400}", "all", 20, "'kept' needs one strategy, not 'all'"),
        (
            "{name: scratchpad, budget: 400}",
            "{name: scratchpad, max_turn: 4}",
            20,
            "unknown key 'max_turn' (did you mean 'max_turns'?)",
        ),
        ("kept_by: pinned", "kept_by: pined", 24, "unknown kept_by 'pined'"),
        ("kept_by: pinned", "equals: pinned", 24, "'equals' does not apply to 'kept'"),
        ("        at_turn: 5", "        at_turn: 0", 8, "at_turn must be a turn number"),
        ("        at_turn: 5", "        at_turn: 99", 8, "at_turn 99: demo.jsonl has turns 1..10"),
        ("version: 1", "version: 2", 1, "version 2 is not supported"),
        (
            "  - name: scratchpad pins it",
            "  - name: allergy evicted",
            18,
            "duplicate case name 'allergy evicted' (first at line 4)",
        ),
    ],
)
def test_spec_errors_have_lines(
    tmp_path: Path, old: str, new: str, line: int, message: str
) -> None:
    assert old in HOLDING
    spec = write_spec(tmp_path, HOLDING.replace(old, new, 1))
    r = invoke(str(spec))
    assert r.exit_code == 2, r.output
    assert f"{spec}:{line}: " in r.stderr, r.stderr
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.output


def test_store_expectations_need_a_store(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        """\
        cases:
          - name: no store
            transcript: demo.jsonl
            expect:
              - max_findings: {duplicate: 0}
    """,
    )
    with pytest.raises(InputError, match=r"checks\.yaml:5: 'max_findings' needs a store"):
        load_spec(spec)


def test_jobs_2_gives_the_same_json_as_jobs_1(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, HOLDING.replace("at_turn: 5", "at_turn: 7"))  # one case fails
    one = invoke(str(spec), "--format", "json", "--jobs", "1")
    two = invoke(str(spec), "--format", "json", "--jobs", "2")
    assert one.exit_code == two.exit_code == 1, one.output + two.output
    assert one.stdout == two.stdout  # durations are not part of the JSON, so byte-identical
    doc = json.loads(one.stdout)
    assert set(doc) >= {"cases", "passed", "failed"}
    assert (doc["passed"], doc["failed"]) == (2, 1)
    assert [c["name"] for c in doc["cases"]] == NAMES
    assert set(doc["cases"][0]) >= {"name", "passed", "failures"}
    assert doc["cases"][0]["failures"] == [
        "kept 'allergic to peanuts' at turn 7 under sliding_window (budget 400): "
        "lost at turn 6 (evicted)"
    ]


def test_github_annotations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_spec(tmp_path, HOLDING.replace("at_turn: 5", "at_turn: 7"))
    r = invoke(str(spec))
    assert "::error" not in r.output  # only on GitHub Actions

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    r = invoke(str(spec))
    assert r.exit_code == 1
    lines = [x for x in r.stdout.splitlines() if x.startswith("::error")]
    assert lines == [
        f"::error file={spec},line=7::allergy evicted: kept 'allergic to peanuts' at turn 7 "
        "under sliding_window (budget 400): lost at turn 6 (evicted)"
    ]
    # with --format json, stdout stays pure JSON and the annotations go to stderr
    r = invoke(str(spec), "--format", "json")
    json.loads(r.stdout)
    assert r.stderr.startswith("::error file=")


def test_paths_are_relative_to_the_spec_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "data").mkdir()
    shutil.copy(DEMO, tmp_path / "data" / "demo.jsonl")
    spec = tmp_path / "specs" / "checks.yaml"
    spec.write_text(HOLDING.replace("transcript: demo.jsonl", "transcript: ../data/demo.jsonl"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = invoke("../specs/checks.yaml")
    assert r.exit_code == 0, r.output


def test_facts_file_expectations(tmp_path: Path) -> None:
    (tmp_path / "facts.json").write_text(
        json.dumps({"name": "Mia", "allergy": "peanuts", "age": 34}), encoding="utf-8"
    )
    spec = write_spec(
        tmp_path,
        """\
        cases:
          - name: profile
            store: {facts_file: facts.json}
            expect:
              - fact_key: allergy
                equals: peanuts
              - fact_key: Allergy          # normalized lookup
              - fact_key: age
                equals: 34                 # numbers compare as the facts file writes them
              - fact_key: name
                equals: Max
              - fact_key: birthday
    """,
    )
    report = check(spec)
    assert report.failed == 1
    case = report.cases[0]
    assert case.failures == [
        "fact_key 'name' equals 'Max': facts.json has 'name' = 'Mia' (line 1)",
        "fact_key 'birthday': no such key in facts.json (keys: name, allergy, age)",
    ]
    assert case.failure_lines == [10, 12]


def test_max_findings_on_a_facts_file(tmp_path: Path) -> None:
    # two spellings of one key with different values: the audit reports a conflict
    (tmp_path / "facts.json").write_text(
        json.dumps(
            [
                {"key": "allergy", "value": "peanuts", "updated_at": "2026-01-01T00:00:00Z"},
                {"key": "Allergy", "value": "shellfish", "updated_at": "2026-02-01T00:00:00Z"},
            ]
        ),
        encoding="utf-8",
    )
    text = """\
        cases:
          - name: hygiene
            store: {facts_file: facts.json}
            expect:
              - max_findings: {duplicate: 0, conflict: LIMIT}
    """
    assert check(write_spec(tmp_path, text.replace("LIMIT", "1"))).failed == 0
    report = check(write_spec(tmp_path, text.replace("LIMIT", "0")))
    assert report.failed == 1
    (failure,) = report.cases[0].failures
    assert failure.startswith("max_findings conflict ≤ 0: found 1: ")
    assert "'allergy' = 'peanuts'" in failure
    assert report.cases[0].failure_lines == [5]


def test_finding_kinds_match_the_audit() -> None:
    from memdiag.stores.audit import KINDS

    assert tuple(FINDING_KINDS) == tuple(KINDS)


def test_dogfood_fixture_spec_passes() -> None:
    report = check(FIXTURES / "checks.yaml")
    assert report.failed == 0, [c.failures for c in report.cases if not c.passed]


def test_every_output_format_renders(tmp_path: Path) -> None:
    from memdiag.render import OutputFormat

    spec = write_spec(tmp_path, HOLDING)
    for fmt in OutputFormat:
        r = invoke(str(spec), "--format", fmt.value)
        assert r.exit_code == 0, (fmt, r.output)
        if fmt is OutputFormat.jsonl:
            rows = [json.loads(x) for x in r.stdout.splitlines()]
            assert [x["name"] for x in rows] == NAMES


def test_junit_survives_control_characters_and_markup(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        HOLDING.replace(
            "name: allergy evicted", 'name: "[bold]<allergy> & \\u0007 evicted"'
        ).replace("at_turn: 5", "at_turn: 7"),
    )
    junit = tmp_path / "report.xml"
    r = invoke(str(spec), "--junit", str(junit))
    assert r.exit_code == 1
    assert "[bold]<allergy> &" in r.stdout  # printed as text, not as Rich markup
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "[bold]<allergy> & \ufffd evicted"


def test_bad_jobs_is_a_usage_error(tmp_path: Path) -> None:
    r = invoke(str(write_spec(tmp_path, HOLDING)), "--jobs", "0")
    assert r.exit_code == 2
    assert "--jobs must be at least 1" in r.stderr


def _build_chroma(path: Path, model: Path, collections: dict[str, str]) -> None:
    """A persistent store with one cosine collection per fixture file of fixtures/memories."""
    import chromadb
    from chromadb.config import Settings
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction, ONNXMiniLM_L6_V2

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ONNXMiniLM_L6_V2, "DOWNLOAD_PATH", model)
        client = chromadb.PersistentClient(
            path=str(path), settings=Settings(anonymized_telemetry=False)
        )
        for name, fixture in collections.items():
            col = client.create_collection(
                name,
                embedding_function=DefaultEmbeddingFunction(),  # type: ignore[arg-type]
                configuration={"hnsw": {"space": "cosine"}},
            )
            rows = [
                json.loads(x)
                for x in (FIXTURES / "memories" / fixture).read_text(encoding="utf-8").splitlines()
                if x.strip()
            ]
            col.add(
                ids=[r["id"] for r in rows],
                documents=[r["document"] for r in rows],
                metadatas=[r["metadata"] for r in rows],
            )
        client.close()


@pytest.mark.chroma
def test_store_hygiene_on_a_chroma_store(tmp_path: Path, model_dir: Path) -> None:
    store = tmp_path / "chroma"
    _build_chroma(store, model_dir, {"clean": "clean.jsonl", "dirty": "dirty.jsonl"})
    shutil.copy(FIXTURES / "facts.json", tmp_path / "facts.json")  # strong facts live here
    spec = write_spec(
        tmp_path,
        """\
        cases:
          - name: clean collection
            store: {chroma: chroma, collection: clean, facts_file: facts.json}
            expect:
              - max_findings: {duplicate: 0, conflict: 0, strong_fact_in_vector_store: 0}
          - name: dirty collection
            store: {chroma: chroma, collection: dirty, facts_file: facts.json}
            expect:
              - max_findings: {duplicate: 0, conflict: 0, strong_fact_in_vector_store: 0}
    """,
    )
    one = invoke(str(spec), "--format", "json")
    two = invoke(str(spec), "--format", "json", "--jobs", "2")
    assert one.exit_code == 1, one.output
    assert one.stdout == two.stdout
    clean, dirty = json.loads(one.stdout)["cases"]
    assert clean["passed"], clean["failures"]
    assert not dirty["passed"]
    assert [f.split(":")[0] for f in dirty["failures"]] == [
        "max_findings duplicate ≤ 0",
        "max_findings conflict ≤ 0",
        "max_findings strong_fact_in_vector_store ≤ 0",
    ]
    assert "found 3" in dirty["failures"][0]  # d2/d3, d10/d12, and d2/d4 (the same claim)
    assert dirty["failure_lines"] == [9, 9, 9]
