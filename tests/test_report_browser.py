"""The interactive report in a real Chromium (Debian's chromium-headless-shell via playwright).

Every page is opened from disk with all other requests refused and recorded: each test ends by
asserting that the page asked for nothing, raised nothing and opened no dialog.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.config import Settings
from memdiag.render.jsonout import replay_json
from memdiag.replay import run
from memdiag.transcript import load
from tests.browser import PageLog, launch, missing_reason, open_report
from tests.conftest import FIXTURES
from tests.helpers import windows_from_deltas

REASON = missing_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

DEMO = FIXTURES / "demo.jsonl"
FACT = "allergic to peanuts"


def cli(*args: str) -> None:
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launch() as context:
        yield context


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("reports")
    out = {"replay": d / "replay.html", "diagnose": d / "diagnose.html", "zh": d / "zh.html"}
    cli("replay", str(DEMO), "--strategy", "all", "--budget", "400", "--fact", FACT,
        "--html", str(out["replay"]))  # fmt: skip
    cli("diagnose", str(DEMO), "--budget", "400", "--html", str(out["diagnose"]))
    cli("replay", str(FIXTURES / "demo_zh.jsonl"), "--strategy", "all", "--budget", "300",
        "--html", str(out["zh"]))  # fmt: skip
    return out


class Opened:
    def __init__(self, browser: Any, path: Path) -> None:
        self.log = PageLog()
        self.page = open_report(browser, path, self.log)

    def turn(self) -> int:
        return int(self.page.evaluate("memdiag.turn()"))

    def settle(self) -> None:
        """Wait for the frame that renders the last turn change."""
        self.page.evaluate("new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")

    def col(self, strategy: str) -> Any:
        return self.page.locator(f".col[data-strategy='{strategy}']")

    def window_ids(self, strategy: str) -> list[str]:
        return self.col(strategy).locator(".msg-rows .row .id").all_inner_texts()

    def clean(self) -> None:
        assert self.log.requests == [], self.log.requests
        assert self.log.errors == [], self.log.errors
        assert self.log.dialogs == [], self.log.dialogs
        self.page.close()


@pytest.fixture
def opened(browser: Any) -> Iterator[Any]:
    pages: list[Opened] = []

    def _open(path: Path) -> Opened:
        o = Opened(browser, path)
        pages.append(o)
        return o

    yield _open
    for o in pages:
        o.clean()


def _settings(**kw: Any) -> Settings:
    return Settings().with_overrides(**kw)


def test_report_opens_with_every_strategy_side_by_side(reports, opened):
    o = opened(reports["replay"])
    page = o.page
    assert page.title() == "memdiag replay"
    cols = page.locator(".col").evaluate_all("els => els.map(e => e.dataset.strategy)")
    assert cols == ["sliding_window", "summary", "scratchpad"]
    assert page.locator(".tlrow[data-strategy]").count() == 3
    # a replay opens at the first loss (the 400-token window evicts the allergy at turn 6),
    # not at the last turn where every fact reads as gone with its session
    report = run(load(DEMO), _settings(budget=400, strategy="all"), [FACT])
    losses = [
        int(str(e["turn"]))
        for res in report.results
        for f in res.facts
        for e in f.history
        if e["event"] == "lost" and e.get("mechanism") != "session_end"
    ]
    assert o.turn() == min(losses) == 6
    # the sections of each column, in window order
    order = o.col("summary").locator(".sec h4 span:first-child").all_inner_texts()
    assert order == ["system", "pinned scratchpad", "summary", "memories", "messages"]


def test_scrub_to_the_eviction_turn_shows_the_message_left_and_the_fact_marked(reports, opened):
    t = load(DEMO)
    rep = run(t, _settings(budget=400, strategy="sliding_window"), [FACT])
    survival = rep.results[0].facts[0]
    lost_at, evidence = survival.lost_at_turn, survival.evidence_id
    assert lost_at is not None and evidence is not None and survival.mechanism == "evicted"

    o = opened(reports["replay"])
    page = o.page
    page.keyboard.press("Home")
    for _ in range(lost_at - 2):
        page.keyboard.press("ArrowRight")
    o.settle()
    assert o.turn() == lost_at - 1
    before = o.col("sliding_window")
    assert evidence in o.window_ids("sliding_window")
    assert before.locator(".fs [data-fact='0']").get_attribute("data-state") == "kept"

    page.keyboard.press("ArrowRight")
    o.settle()
    assert o.turn() == lost_at
    col = o.col("sliding_window")
    left = col.locator(".left-rows .row[data-left='evicted'] .id").all_inner_texts()
    assert evidence in left
    assert evidence not in o.window_ids("sliding_window")
    status = col.locator(".fs [data-fact='0']")
    assert status.get_attribute("data-state") == "lost"
    assert status.get_attribute("data-now") == "lost"
    # the timeline marks that moment for that strategy
    mark = page.locator(
        f".tlrow[data-strategy='sliding_window'] .mk[data-event='lost'][data-turn='{lost_at}']"
    )
    assert mark.count() == 1
    # the scratchpad keeps it pinned at the same budget: highlighted in its pinned text
    pad = o.col("scratchpad")
    assert pad.locator(".fs [data-fact='0']").get_attribute("data-state") == "kept"
    assert pad.locator(".sec-scratchpad .ln.hl").count() >= 1


def test_page_windows_match_the_replay_at_every_turn(reports, opened):
    """The page rebuilds each window from deltas; it must equal the replay's own windows."""
    t = load(DEMO)
    rep = run(t, _settings(budget=400, strategy="all"), [FACT])
    doc = replay_json(t.path, rep.encoding, rep.budget, rep.results)
    o = opened(reports["replay"])
    for res in rep.results:
        expected = windows_from_deltas(doc["strategies"][res.name]["turns"])
        for turn, ids in enumerate(expected, start=1):
            o.page.evaluate(f"memdiag.setTurn({turn})")
            o.settle()
            assert o.window_ids(res.name) == ids, (res.name, turn)
        # the last window also equals the strategy's final view (an independent path)
        assert res.final is not None
        assert o.window_ids(res.name) == [t.messages[i].id for i in res.final.indices]
        shown = {
            "summary": o.col(res.name).locator(".sec-summary .text").all_inner_texts(),
            "pinned": o.col(res.name).locator(".sec-scratchpad .text").all_inner_texts(),
        }
        assert "\n".join(shown["summary"]).strip() == res.final.summary.strip()
        assert "\n".join(shown["pinned"]).strip() == res.final.pinned.strip()


def test_keyboard_moves_between_turns(reports, opened):
    o = opened(reports["replay"])
    page = o.page
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    o.settle()
    assert o.turn() == 3
    page.keyboard.press("ArrowLeft")
    o.settle()
    assert o.turn() == 2
    page.keyboard.press("Shift+ArrowRight")
    o.settle()
    assert o.turn() == 10  # clamped to the last turn
    assert page.locator("body").get_attribute("data-turn") == "10"
    assert page.locator("#turn-label").inner_text().startswith("turn 10 / 10")


def test_hovering_a_message_id_shows_its_text_role_session_and_tokens(reports, opened):
    t = load(DEMO)
    o = opened(reports["replay"])
    row = o.col("sliding_window").locator(".msg-rows .row").first
    mid = row.locator(".id").inner_text()
    m = t.message(mid)
    row.hover()
    pop = o.page.locator("#pop")
    pop.wait_for(state="visible")
    text = pop.inner_text()
    assert m.content in text and m.role in text and f"session {m.session}" in text
    assert "tokens" in text
    row.click()  # a click pins it
    assert "pinned" in (pop.get_attribute("class") or "")
    o.page.keyboard.press("Escape")
    assert not pop.is_visible()


def test_clicking_a_diagnose_card_moves_the_timeline_to_the_failure_and_its_cause(reports, opened):
    r = CliRunner().invoke(app, ["diagnose", str(DEMO), "--budget", "400", "--format", "json"])
    diagnoses = json.loads(r.stdout)["diagnoses"]
    first = diagnoses[0]
    assert first["verdict"] == "short_term_dropped"
    o = opened(reports["diagnose"])
    page = o.page
    assert page.locator(".card").count() == len(diagnoses)
    page.keyboard.press("Home")
    o.settle()
    assert o.turn() == 1
    page.locator(".card[data-card='0'] h3").click()
    o.settle()
    assert o.turn() == first["at_turn"]
    assert page.locator(".card[data-card='0']").get_attribute("class").endswith("active")
    # the eviction that caused it is marked on the diagnosed strategy's row
    cause = first["details"]["lost_at_turn"]
    marked = page.locator(".tlrow[data-strategy='sliding_window'] .mk.cause")
    assert marked.count() == 1 and marked.get_attribute("data-turn") == str(cause)
    page.locator(".card[data-card='0'] [data-jump='cause']").click()
    o.settle()
    assert o.turn() == cause
    # what-if as a table, the smallest budget as a number
    card = page.locator(".card[data-card='0']")
    kept = first["details"]["what_if"]["kept_by_strategy"]
    rows = card.locator("table").first.locator("tr").all_inner_texts()
    assert len(rows) == len(kept) + 1
    smallest = first["details"]["what_if"]["smallest_sliding_window_budget"]
    assert card.locator(".big").inner_text() == str(smallest)
    assert "kept_by_strategy=" not in card.inner_text()


def test_chinese_text_renders_as_written(reports, opened):
    t = load(FIXTURES / "demo_zh.jsonl")
    o = opened(reports["zh"])
    o.page.evaluate("memdiag.setTurn(1)")
    o.settle()
    user = t.messages[t.turns[0].user_index]
    col = o.col("sliding_window")
    row = col.locator(f".msg-rows .row[data-i='{user.index}']")
    row.first.hover()
    assert user.content in o.page.locator("#pop .body").inner_text()
    # a CJK font is not needed for the text to be the text: compare it, not pixels
    assert any("\u4e00" <= ch <= "\u9fff" for ch in o.page.locator("#app").inner_text())


HOSTILE = [
    "</script><script>window.__pwned = 1; alert('script')</script>",
    '"><img src=x onerror="window.__pwned = 2; alert(\'img\')">',
    '<a href="javascript:window.__pwned = 3">click me</a> javascript:alert(4)',
    "' onmouseover='window.__pwned = 5' x='",
    "{{script}} {{data}} <!-- <style>body{display:none}</style> -->",
    '<iframe src="https://example.com/"></iframe><link rel=stylesheet href="https://example.com/x.css">',
]


def test_hostile_transcript_text_stays_inert(tmp_path, browser):
    p = tmp_path / "evil.jsonl"
    lines = [{"role": "system", "content": HOSTILE[4]}]
    for k, evil in enumerate(HOSTILE):
        lines.append({"id": f"u{k}", "role": "user", "content": f"I'm allergic to peanuts. {evil}"})
        lines.append({"id": f"a{k}", "role": "assistant", "content": evil, "name": "x"})
    lines.append(
        {"role": "assistant", "content": "peanuts!", "forgot": f"allergic to peanuts {HOSTILE[1]}"}
    )
    p.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    pages = {"replay": tmp_path / "r.html", "diagnose": tmp_path / "d.html"}
    cli("replay", str(p), "--strategy", "all", "--budget", "120", "--fact", HOSTILE[0],
        "--html", str(pages["replay"]))  # fmt: skip
    cli("diagnose", str(p), "--budget", "120", "--html", str(pages["diagnose"]))
    for path in pages.values():
        raw = path.read_text(encoding="utf-8")
        assert raw.count("<script") == 2  # the data and the report's own script, nothing else
        assert "<img" not in raw and "<iframe" not in raw and "<a " not in raw
        head, _, rest = raw.partition('<script type="application/json" id="memdiag-data">')
        data, _, tail = rest.partition("</script>")
        assert "__pwned" in data  # the text is there, as JSON, and nowhere else
        assert "__pwned" not in head + tail and "javascript:" not in head + tail
        log = PageLog()
        page = open_report(browser, path, log)
        for turn in range(1, int(page.evaluate("memdiag.data.runs[0].turns.user.length")) + 1):
            page.evaluate(f"memdiag.setTurn({turn})")
            page.evaluate("new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")
            for row in page.locator(".row").all()[:4]:
                row.hover()
                row.click()  # pins the text box
                page.keyboard.press("Escape")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("img, iframe, a[href], link[href], object, embed").count() == 0
        assert page.locator("script").count() == 2
        assert page.locator("[onerror], [onmouseover], [onclick]").count() == 0
        text = page.locator("body").inner_text()
        # shown as the text it is: the replay's tracked fact, the diagnosis's forgotten fact
        assert HOSTILE[0] in text or HOSTILE[1] in text
        assert page.locator("#app").is_visible()  # the injected style did not apply
        assert log.requests == [] and log.errors == [] and log.dialogs == [], log
        page.close()


def test_check_report_lists_cases_and_links_expectations_to_turns(tmp_path, browser):
    spec = tmp_path / "checks.yaml"
    spec.write_text(
        "version: 1\n"
        "defaults: {strategy: {name: sliding_window, budget: 400}}\n"
        "cases:\n"
        f"  - name: evicted at six\n    transcript: {DEMO}\n    expect:\n"
        f"      - lost: {FACT}\n        at_turn: 6\n"
        f"  - name: wrongly kept\n    transcript: {DEMO}\n    expect:\n"
        f"      - kept: {FACT}\n        at_turn: 8\n"
        f"  - name: profile\n    store: {{facts_file: {FIXTURES / 'facts.json'}}}\n"
        "    expect:\n      - fact_key: name\n",
        encoding="utf-8",
    )
    out = tmp_path / "check.html"
    r = CliRunner().invoke(app, ["check", str(spec), "--html", str(out)])
    assert r.exit_code == 1, r.output  # the second case fails, and the report is still written
    log = PageLog()
    page = open_report(browser, out, log)
    rows = page.locator("#cases tr[data-run]")
    assert rows.count() == 3
    marks = rows.locator("td:first-child").all_inner_texts()
    assert marks == ["✓", "✗", "✓"]
    assert rows.nth(2).get_attribute("data-run") == ""  # no transcript: no timeline
    rows.nth(1).click()
    card = page.locator(".card[data-card='0']")
    assert "failed" in (card.get_attribute("class") or "")
    assert "lost at turn 6" in card.inner_text()
    page.keyboard.press("Home")
    card.locator("h3").click()
    page.evaluate("new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")
    assert page.evaluate("memdiag.turn()") == 8
    card.locator("[data-jump='cause']").click()
    page.evaluate("new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")
    assert page.evaluate("memdiag.turn()") == 6
    col = page.locator(".col[data-strategy='sliding_window']")
    assert "u1" in col.locator(".left-rows .row[data-left='evicted'] .id").all_inner_texts()
    assert log.requests == [] and log.errors == [] and log.dialogs == [], log
    page.close()


def test_replay_report_shows_failures_lane_and_fact_survival(tmp_path, opened):
    path = tmp_path / "replay.html"
    cli("replay", str(DEMO), "--strategy", "all", "--budget", "400", "--html", str(path))
    o = opened(path)
    page = o.page
    # the transcript's own failures (`forgot` markers) on a lane of their own
    marks = page.locator(".tlrow[data-row='failures'] .mk.fail")
    assert marks.evaluate_all("els => els.map(e => e.dataset.failure)") == ["a8", "a9"]
    assert [int(x) for x in marks.evaluate_all("els => els.map(e => e.dataset.turn)")] == [8, 9]
    # the answer: each tracked fact's fate per strategy, in words; a loss links to its turn
    table = page.locator("#survival")
    text = table.inner_text()
    assert "prefers window seats" in text  # the second marker's fact is tracked
    assert "session_end" not in text and "kept to session end (turn 8)" in text
    cell = table.locator("td[data-strategy='sliding_window'].link").first
    assert cell.inner_text() == "evicted at turn 6"
    page.keyboard.press("End")
    o.settle()
    cell.click()
    o.settle()
    assert o.turn() == 6
    # n/p step through the failures too
    page.keyboard.press("n")
    o.settle()
    assert o.turn() == 8


def test_diagnose_cards_are_words_that_stay_inside_them(tmp_path, opened):
    path = tmp_path / "diagnose.html"
    cli("diagnose", str(DEMO), "--budget", "400", "--html", str(path))
    for width in (1400, 700):
        o = opened(path)
        o.page.set_viewport_size({"width": width, "height": 900})
        o.settle()
        cards = o.page.locator(".card")
        assert cards.count() == 2
        text = o.page.locator("#cards").inner_text()
        for raw in ("semantic_search", "window_tokens", "stores_checked", "found=", "_", "=None"):
            assert raw not in text.replace("short_term_dropped", "").replace(
                "long_term_not_written", ""
            ).replace("sliding_window", ""), raw
        assert "at turn 6: evicted by sliding_window" in text
        outside = o.page.evaluate(
            """() => Array.from(document.querySelectorAll('.card')).flatMap(c => {
              const r = c.getBoundingClientRect();
              return Array.from(c.querySelectorAll('*'))
                .filter(e => e.getBoundingClientRect().right > r.right + 1)
                .map(e => e.tagName + ': ' + e.textContent.slice(0, 40)) })"""
        )
        assert outside == []
        # the evidence id links to its message
        assert o.page.locator(".card[data-card='0'] .grid code[data-i]").first.inner_text() == "u1"


def test_compactions_are_marked_on_the_timeline_with_their_summary(tmp_path, opened):
    """A Claude Code session's compaction (fixtures/formats/claude_code/forgets_rule.jsonl):
    a marker on the timeline at the first turn after it, and its kept/dropped list and text."""
    session = FIXTURES / "formats" / "claude_code" / "forgets_rule.jsonl"
    page_path = tmp_path / "cc.html"
    cli("replay", str(session), "--strategy", "all", "--html", str(page_path))
    report = run(load(session), _settings(strategy="all"))
    (comp,) = report.compactions
    o = opened(page_path)
    page = o.page
    marks = page.locator(".tlrow[data-row='compactions'] .mk.compact")
    assert marks.count() == 1
    assert int(marks.first.get_attribute("data-turn") or 0) == comp.after_turn + 1
    assert f"line {comp.line}" in (marks.first.get_attribute("title") or "")
    box = page.locator("details.compaction")
    text = box.inner_text()
    assert comp.dropped[0].text in text and comp.kept[0].text in text
    assert comp.summary in page.locator("pre.summary-text").inner_text()
    o.page.evaluate("memdiag.setTurn(1)")
    box.locator("button").click()
    o.settle()
    assert o.turn() == comp.after_turn + 1
