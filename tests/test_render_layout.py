"""The console output at 80 and 120 columns: diagnose panels are label/value grids in words
(no label glued to its value, no Python repr, wrapped lines under the value column), no token
broken across lines, and the evidence shows what states the fact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.config import Settings
from memdiag.diagnosis import diagnose, failures_from
from memdiag.render.words import diagnosis_lines
from memdiag.transcript import load

from .conftest import FIXTURES
from .layout import broken_tokens, grid_problems, panel_bodies

WIDTHS = [80, 120]
DEMO = FIXTURES / "demo.jsonl"
STORES = FIXTURES / "stores"
runner = CliRunner()


def cli(width: int, *args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def _expected(path: Path, *args: str, **over: object) -> list[list[str]]:
    t = load(path)
    ds = diagnose(t, Settings(budget=400).with_overrides(**over), failures_from(t, (), None))
    return [
        [x for ln in diagnosis_lines(d) for x in (ln.label, ln.value, ln.quote or "")] for d in ds
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_diagnose_panels_are_grids_in_words(width: int) -> None:
    out = cli(width, "diagnose", str(DEMO), "--budget", "400")
    panels = panel_bodies(out)
    expected = _expected(DEMO)
    assert len(panels) == len(expected) == 2
    for rows, sources in zip(panels, expected, strict=True):
        labels = sources[0::3]
        assert not grid_problems(rows, labels), grid_problems(rows, labels)
        assert not broken_tokens("\n".join(rows), sources, width - 4)
    text = "\n".join(r for p in panels for r in p)
    # the answer, in words
    assert "short_term_dropped" in text and "at turn 6: evicted by sliding_window" in text
    assert "=" not in text.replace(" = ", "")  # no key=value reprs
    # evidence: what states the fact, the session named once per panel
    assert text.count("session mon") == 2
    assert "Which seat should I pick" not in text  # the failing question is not evidence
    assert "flight" + '": "' not in text and '"price_eur"' not in text  # no tool JSON


@pytest.mark.parametrize("width", WIDTHS)
def test_store_details_are_words_not_reprs(width: int, model_dir: Path) -> None:
    conv = STORES / "conversation.jsonl"
    args = [
        "diagnose",
        str(conv),
        "--chroma",
        str(STORES / "mem0"),
        "--embedding-function",
        "default",
        "--facts-file",
        str(FIXTURES / "longterm_facts.json"),
    ]
    out = cli(width, *args)
    panels = panel_bodies(out)
    assert len(panels) == 5
    for rows in panels:
        labels = {r.split("  ")[0] for r in rows if not r.startswith(" ")}
        assert not grid_problems(rows, labels), grid_problems(rows, labels)
    text = "\n".join(r for p in panels for r in p)
    for repr_ in (
        "found=True",
        "updated_at=None",
        "top_k=",
        "stores_checked",
        "skipped_reason",
        "facts_file",
        "max_distance",
    ):
        assert repr_ not in text, repr_
    assert "location = 'Berlin': the key holds an outdated value" in text
    assert "rank 1 of the top 5 (distance 1.070)" in text
    # every record id whole, on one line
    data = json.loads(cli(width, *args, "--format", "json"))
    ids = [
        d["details"]["vector_store"]["id"]
        for d in data["diagnoses"]
        if d["details"].get("vector_store", {}).get("found")
    ]
    assert ids and all(i in text for i in ids)


def test_evidence_lists_only_what_states_it_in_score_order() -> None:
    from memdiag.render.words import shown_evidence

    t = load(DEMO)
    for d in diagnose(t, Settings(budget=400), failures_from(t, (), None)):
        shown, stated = shown_evidence(d)
        assert stated and shown and all(e.passes for e in shown)
        assert [e.score for e in shown] == sorted((e.score for e in shown), reverse=True)
        assert all(e.turn != d.at_turn for e in shown)
        # JSON keeps every candidate
        assert len(d.to_dict()["evidence"]) == len(d.evidence) > len(shown)


# --- replay --strategy all: the answer first -------------------------------------------------

TRACE = FIXTURES / "formats" / "traces" / "otel_spans.json"


@pytest.mark.parametrize("width", WIDTHS)
def test_replay_all_prints_the_fact_survival_first(width: int) -> None:
    out = cli(width, "replay", str(DEMO), "--strategy", "all", "--budget", "400")
    lines = out.splitlines()
    assert lines[0].startswith(str(DEMO)) and "Fact survival" in out
    assert len(lines) < 30  # not the per-turn lists of three strategies
    assert "evicted u1" not in out and "--show changes" in out
    # every header and word whole: nothing cut with an ellipsis, no word split across lines
    assert "…" not in out
    sources = [
        "fact stated sliding_window summary scratchpad Fact survival (strong facts and "
        "`forgot` markers found in the transcript) Mia allergic to peanuts prefers window "
        "seats turn 1 (u1) turn 3 (u3) evicted at turn 6 kept to session end (turn 8)",
        *lines[:2],
        *lines[-5:],
    ]
    table = [ln for ln in lines if ln[:1] in "┃│┏┡└"]
    assert not broken_tokens("\n".join(table), sources, width)
    assert all(ln.rstrip()[-1] in "┃│┓┩┘" for ln in table), "the table is cut at the right"
    # the demo's second `forgot` marker is tracked too
    assert "prefers" in out and "window" in out
    # a fact kept until its session ended is no eviction
    cells = " ".join(" ".join(ln.strip("│ ").split()) for ln in table)
    assert "session_end" not in out and "lost at turn 9" not in cells
    assert "kept to session end (turn 8)" in " ".join(cells.replace("│", " ").split()) or (
        cells.count("kept to") == 6
    )
    more = cli(
        width, "replay", str(DEMO), "--strategy", "all", "--budget", "400", "--show", "changes"
    )
    assert "evicted u1" in more and more.index("Fact survival") < more.index("evicted u1")


def test_replay_tracks_the_forgot_markers() -> None:
    data = json.loads(cli(120, "replay", str(DEMO), "--budget", "400", "--format", "json"))
    facts = [f["fact"] for f in data["strategies"]["sliding_window"]["facts"]]
    assert "prefers window seats" in facts and "allergic to peanuts" in facts
    seats = next(
        f
        for f in data["strategies"]["sliding_window"]["facts"]
        if f["fact"] == "prefers window seats"
    )
    assert seats["stated_at_turn"] == 3 and seats["evidence_id"] == "u3"


@pytest.mark.parametrize("width", WIDTHS)
def test_replay_of_a_trace_simulates_at_the_recorded_size(width: int) -> None:
    from memdiag.replay import prepare
    from memdiag.strategies.observed import request_tokens, size_known

    t = load(TRACE)
    rctx = prepare(t, Settings())
    largest = max(request_tokens(w, rctx.costs, rctx.counter) for w in t.windows if size_known(w))
    out = cli(width, "replay", str(TRACE), "--strategy", "all")
    assert f"budget {largest} tokens (the largest request the trace recorded" in " ".join(
        out.split()
    )
    data = json.loads(cli(width, "replay", str(TRACE), "--strategy", "all", "--format", "json"))
    assert data["budget"] == largest
    # --budget still decides
    data = json.loads(
        cli(width, "replay", str(TRACE), "--strategy", "all", "--budget", "500", "--format", "json")
    )
    assert data["budget"] == 500


# --- inspect-store ---------------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_inspect_store_keeps_ids_whole_and_says_things_once(width: int) -> None:
    args = [
        "inspect-store",
        "--chroma",
        str(STORES / "mem0"),
        "--facts-file",
        str(FIXTURES / "longterm_facts.json"),
    ]
    out = cli(width, *args)
    data = json.loads(cli(width, *args, "--format", "json"))
    text = " ".join(out.split())
    # every record id shown is whole (the first ids of each finding are shown)
    shown = [i for f in data["findings"] for i in f["ids"][:4]]
    assert shown and all(i in out for i in shown if " " not in i)
    # every word of every message (and of the stores' reasons) is printed whole
    printed = {t.strip("“”\"'()[]{},.;:!?…") for t in out.split()}
    said = [f["message"] for f in data["findings"]] + [
        s.get("retrieval_reason", "") for s in data["stores"]
    ]
    words = {t.strip("“”\"'()[]{},.;:!?…") for m in said for t in m.split()}
    assert {w for w in words if len(w) < width - 12} <= printed
    for line in out.splitlines():  # no UUID cut at a line end
        for tok in line.split():
            if tok.startswith("6d656d30"):
                assert len(tok.strip(",")) == 36, line
    # the advice shared by the five strong-fact findings is said once
    advice = "retrieval may miss it, store it under an exact key"
    assert sum(advice in f["message"] for f in data["findings"]) == 5
    assert text.count(advice) == 1
    # mem0's bookkeeping collection: one line of words, no row of Nones
    assert "None" not in out.replace("embedding_function=None", "")
    assert "mem0's own bookkeeping collection" in text
    # never "embedding function none, retrieval checks available" in one breath
    assert "embedding function none" not in text
    assert "no embedding function persisted with the collection" in text
    assert "retrieval not checked: the collection has no persisted embedding function" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_inspect_store_names_the_model_it_checked_with(width: int, model_dir: Path) -> None:
    out = cli(
        width,
        "inspect-store",
        "--chroma",
        str(STORES / "langchain"),
        "--embedding-function",
        "default",
    )
    text = " ".join(out.split())
    assert "no embedding function persisted with the collection" in text
    assert "retrieval checked with default" in text and "named by --embedding-function" in text
