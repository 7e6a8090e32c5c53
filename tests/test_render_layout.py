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
