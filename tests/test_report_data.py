"""The report's embedded document, without a browser: escaping, deltas, texts, size, CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.config import Settings
from memdiag.render.report import TextRecorder, document, embed_json, report_page, run_data
from memdiag.render.report.build import diagnose_document
from memdiag.replay import run
from memdiag.transcript import load
from memdiag.transcript.model import RawMessage, RawSession, build
from tests.conftest import FIXTURES

DEMO = FIXTURES / "demo.jsonl"


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_embedded_json_has_no_markup_characters_and_round_trips(text: str) -> None:
    out = embed_json({"text": text, "list": [text]})
    assert not set(out) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(out) == {"text": text, "list": [text]}


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from('<>&\u2028\u2029\\u003c"é花 ') | st.characters()))
def test_embedded_json_escapes_as_one_translate_pass_would(text: str) -> None:
    """The escapes are applied one by one (fast); the page must be what a single
    str.translate of every character gives (the form the report has always had)."""
    doc = {"text": text, "keys": {text: [text, 1]}}
    plain = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    table = str.maketrans(
        {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
    )
    assert embed_json(doc) == plain.translate(table)


def _doc(path=DEMO, strategy: str = "all", budget: int = 400, facts=()) -> tuple[Any, dict]:
    t = load(path)
    s = Settings().with_overrides(strategy=strategy, budget=budget)
    recorder = TextRecorder(t)
    rep = run(t, s, facts, observe=recorder)
    return rep, document("replay", "memdiag replay", [run_data(rep, recorder)])


def test_page_holds_only_its_own_two_scripts_and_a_csp_with_their_hash() -> None:
    t_evil = "</script><script>alert(1)</script> {{script}} {{data}} </ScRiPt >"
    raw = [RawMessage("user", f"I'm allergic to peanuts. {t_evil}"), RawMessage("assistant", "ok")]
    t = build(raw, path="evil.jsonl", format="canonical")
    rep = run(t, Settings().with_overrides(budget=200), ["allergic to peanuts"])
    page = report_page(document("replay", "x", [run_data(rep)]))
    assert len(re.findall(r"<script", page, re.I)) == 2
    assert len(re.findall(r"</script", page, re.I)) == 2
    script = re.search(r"<script>(.*)</script>", page, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"script-src &#x27;sha256-{digest}&#x27;" in page
    assert "connect-src &#x27;none&#x27;" in page
    data = re.search(r'id="memdiag-data">(.*?)</script>', page, re.S)
    assert data is not None
    assert json.loads(data.group(1))["runs"][0]["messages"]["text"][0].endswith(t_evil)


def _windows(strategy: dict) -> list[list[int]]:
    """The page's rebuild, in Python: drop, enter, evict, summarize."""
    window: set[int] = set()
    out = []
    for i in range(len(strategy["entered"])):
        window -= set(strategy["dropped"][i])
        window |= set(strategy["entered"][i])
        window -= set(strategy["evicted"][i]) | set(strategy["summarized"][i])
        out.append(sorted(window))
    return out


def _text_at(doc: dict, changes: list, turn: int) -> str:
    lines: list[int] = []
    for at, ids in changes:
        if at <= turn:
            lines = ids
    return "\n".join(doc["runs"][0]["lines"][k] for k in lines)


def test_deltas_rebuild_each_strategy_window_and_its_texts() -> None:
    for path in (DEMO, FIXTURES / "allergy.jsonl", FIXTURES / "demo_zh.jsonl"):
        rep, doc = _doc(path, budget=300)
        last = len(rep.transcript.turns)
        for res, data in zip(rep.results, doc["runs"][0]["strategies"], strict=True):
            assert data["name"] == res.name
            assert res.final is not None
            assert _windows(data)[-1] == list(res.final.indices), (path, res.name)
            assert _text_at(doc, data["summary"], last) == res.final.summary
            assert _text_at(doc, data["pinned"], last) == res.final.pinned


def test_texts_are_empty_again_after_a_session_start() -> None:
    rep, doc = _doc(DEMO, strategy="scratchpad", budget=400)
    t = rep.transcript
    data = doc["runs"][0]["strategies"][0]
    first_of_s2 = next(turn.number for turn in t.turns if turn.session != t.turns[0].session)
    assert _text_at(doc, data["pinned"], first_of_s2 - 1) != ""
    # the scratchpad starts empty with the session; pins come back only when restated
    assert data["tokens"]["scratchpad"][first_of_s2 - 1] == 0
    assert _text_at(doc, data["pinned"], first_of_s2) == ""


def _generated(n: int):  # type: ignore[no-untyped-def]
    items: list[Any] = [RawMessage("system", "You are a travel assistant.")]
    for k in range(n // 2):
        if k % 50 == 0:
            items.append(RawSession(f"s{k // 50}"))
        fact = " I'm allergic to peanuts." if k % 37 == 0 else ""
        items.append(RawMessage("user", f"Question {k}: what about day {k % 9}?{fact}"))
        items.append(RawMessage("assistant", f"Answer {k}: the plan for day {k % 9} is fine."))
    return build(items, path=f"gen{n}.jsonl", format="canonical")


def test_document_grows_with_messages_not_with_messages_times_turns() -> None:
    sizes = {}
    for n in (400, 1600):
        t = _generated(n)
        s = Settings().with_overrides(strategy="all", budget=600)
        recorder = TextRecorder(t)
        rep = run(t, s, ["allergic to peanuts"], observe=recorder)
        sizes[n] = len(embed_json(document("replay", "x", [run_data(rep, recorder)])))
    per_message = {n: size / n for n, size in sizes.items()}
    assert per_message[1600] < 1.15 * per_message[400], sizes


def test_diagnose_cards_point_at_the_failure_and_the_eviction() -> None:
    t = load(DEMO)
    s = Settings().with_overrides(budget=400)
    r = CliRunner().invoke(app, ["diagnose", str(DEMO), "--budget", "400", "--format", "json"])
    diagnoses = json.loads(r.stdout)["diagnoses"]
    doc = diagnose_document(t, s, diagnoses)
    run0 = doc["runs"][0]
    assert [x["name"] for x in run0["strategies"]] == ["sliding_window", "summary", "scratchpad"]
    cards = run0["cards"]
    assert len(cards) == len(diagnoses)
    for card, d in zip(cards, diagnoses, strict=True):
        assert card["turn"] == d["at_turn"]
        assert run0["facts"][card["fact_index"]]["fact"] == d["fact"]
        if d["verdict"] == "short_term_dropped":
            assert card["cause_turn"] == d["details"]["lost_at_turn"]
            assert card["cause"] == d["details"]["mechanism"]
            # the replay behind the page agrees with the diagnosis
            sw = run0["strategies"][0]["facts"][card["fact_index"]]
            assert [card["cause_turn"], "lost", card["cause"]] in sw["history"]
        if d["layer"] == "long_term":  # its cause is in the store, not an eviction
            assert card["cause_turn"] is None


def test_html_to_a_directory_is_refused_before_any_work(tmp_path) -> None:
    r = CliRunner().invoke(app, ["replay", str(DEMO), "--html", str(tmp_path)])
    assert r.exit_code == 2
    assert "is a directory" in r.output
    assert list(tmp_path.iterdir()) == []
