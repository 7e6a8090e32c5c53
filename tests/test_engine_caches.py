"""The replay engine's run-level caches and indexes give the answers of the direct computation
(docs/engine.md): memoized extraction, shared sentence scores, the term index of evidence."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.config import Settings
from memdiag.extract import default_extractor
from memdiag.facts import FactSet, TermIndex, fold, match
from memdiag.replay import EVIDENCE_ROLES, prepare, replay
from memdiag.strategies.base import RunMemo
from memdiag.strategies.summarizers import ExtractiveSummarizer
from memdiag.tokens import TokenCounter
from tests.helpers import TEXT, transcripts

ROLES = st.sampled_from(["user", "assistant", "tool"])
MESSAGES = st.lists(st.tuples(ROLES, TEXT), min_size=1, max_size=8)

# what sits at a line's edges: combining marks (NFKC may join them to the character before),
# ligatures and width forms, other line breaks, punctuation-only and blank lines, CJK
EDGES = st.lists(
    st.sampled_from(
        ["e", "\u0301", "ﬁ", "ß", "Ａ", "\u2028", "\r", "\xa0", " ", "!", "-", "过敏", "Mia", "ok"]
    ),
    max_size=6,
).map("".join)


@settings(max_examples=80, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=12))
def test_memoized_extractor_answers_as_the_plain_one(texts):
    plain = default_extractor()
    memo = plain.memoized()
    for text in [*texts, *texts]:  # the second pass is answered from the memo
        got = memo.extract(text)
        assert got == plain.extract(text)
        got.clear()  # a caller changing its list does not change the memo
        assert memo.extract(text) == plain.extract(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MESSAGES, min_size=1, max_size=6), st.integers(20, 120))
def test_shared_scores_do_not_change_summaries(chunks, max_tokens):
    """A summarizer that starts with another replay's scores writes the same summaries, and
    every stored score is the sentence's own score."""
    counter = TokenCounter()

    def run(summarizer: ExtractiveSummarizer) -> list[str]:
        out, summary = [], ""
        for chunk in chunks:
            summary = summarizer.summarize(summary, chunk, max_tokens)
            out.append(summary)
        return out

    first = ExtractiveSummarizer(counter)
    expected = run(first)
    second = ExtractiveSummarizer(counter)
    second.scores = first.scores  # as the replays of one run share them
    assert run(second) == expected
    for key, score in first.scores.items():
        role, _, sentence = key.partition(": ")
        assert score == first.score(role, sentence)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(60, 400), st.sampled_from(["summary", "scratchpad"]))
def test_a_run_memo_replays_as_fresh_work(transcript, budget, name):
    """Replaying with a memo that earlier replays filled equals replaying from scratch."""
    rctx = prepare(transcript, Settings(budget=budget))
    fresh = replay(rctx, name, ["allergic to peanuts", "Mia"])
    for other in (budget // 2 + 30, budget):
        replay(rctx.with_budget(other), name)  # fills rctx.memo (with_budget shares it)
    again = replay(rctx, name, ["allergic to peanuts", "Mia"])
    assert again.turns == fresh.turns
    assert again.facts == fresh.facts
    assert isinstance(rctx.memo, RunMemo) and rctx.memo.extractors


FACTS = st.sampled_from(
    ["allergic to peanuts", "Mia", "花生过敏", "window seat", "never book red-eye flights", "I am"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.lists(FACTS | TEXT, min_size=1, max_size=4))
def test_term_index_finds_the_evidence_of_matching_every_message(transcript, facts):
    rctx = prepare(transcript, Settings(budget=300))
    for fact in facts:
        direct = tuple(
            m.index
            for m in transcript.messages
            if m.role in EVIDENCE_ROLES and match(fact, m.content) is not None
        )
        assert rctx.evidence_of(fact) == direct


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT | st.text(max_size=30), min_size=1, max_size=10), TEXT | st.text(max_size=8))
def test_term_index_holding_is_substring_search(texts, term):
    folded = [fold(t) for t in texts]
    index = TermIndex(enumerate(folded))
    if term and "\0" not in term:
        assert index.holding(term) == tuple(n for n, t in enumerate(folded) if term in t)


# facts that share terms with each other and with the texts, as a check's many facts do
SIMILAR = st.sampled_from(
    [
        "allergic",
        "peanuts",
        "花生",
        "过敏",
        "Mia",
        "window",
        "seat",
        "red-eye",
        "🥜",
        "<|endoftext|>",
    ]
)
MANY_FACTS = st.lists(
    FACTS | TEXT | st.text(max_size=20) | st.lists(SIMILAR, min_size=1, max_size=4).map(" ".join),
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    MANY_FACTS,
    st.lists(TEXT | st.text(max_size=40) | st.lists(SIMILAR, max_size=6).map(" ".join), max_size=6),
)
def test_a_fact_set_states_what_matching_every_fact_states(facts, texts):
    facts_ = FactSet(facts)
    for text in texts:
        direct = [k for k, f in enumerate(facts) if match(f, text) is not None]
        assert facts_.stated_in(text) == direct
        assert facts_.stated_in(text, folded=fold(text)) == direct


@settings(max_examples=150, deadline=None)
@given(st.lists(TEXT | st.text(max_size=30) | EDGES, min_size=1, max_size=10), st.data())
def test_term_index_finds_every_text_holding_a_part_of_one(texts, data):
    """Terms cut from the texts themselves (ASCII or not), keys in any order: the texts that
    hold the term, in the order given, whichever of the index's two joined strings holds them."""
    folded = [fold(t) for t in texts]
    keys = data.draw(st.permutations(range(100, 100 + len(folded))))
    index = TermIndex(zip(keys, folded, strict=True))
    source = data.draw(st.sampled_from(folded))
    start = data.draw(st.integers(0, len(source)))
    term = source[start : start + data.draw(st.integers(1, 4))]
    if term and "\0" not in term:
        expected = tuple(k for k, t in zip(keys, folded, strict=True) if term in t)
        assert index.holding(term) == expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(60, 400), st.lists(FACTS, min_size=1, max_size=3, unique=True))
def test_a_report_from_the_commands_context_equals_a_fresh_one(transcript, budget, facts):
    """--html reuses the context its command prepared (with evidence a diagnosis remembered
    for other messages): the report's data is that of a context prepared anew."""
    from memdiag.render.report.build import replay_for_report
    from memdiag.render.report.data import run_data

    settings_ = Settings(budget=budget)
    evidence = {facts[0]: [m.index for m in transcript.messages if m.role == "user"][:2]}
    used = prepare(transcript, settings_)
    for fact in facts:
        replay(used, "summary", [fact])
    used.remember_evidence(facts[-1], [0])  # as a semantic search would
    fresh = run_data(*replay_for_report(transcript, settings_, facts, evidence))
    reused = run_data(*replay_for_report(transcript, settings_, facts, evidence, context=used))
    assert reused == fresh


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 60), st.integers(0, 2)), min_size=1, max_size=200
    ),  # (tokens, turn step) of each unit
    st.lists(st.tuples(st.integers(-10, 300), st.none() | st.integers(0, 90)), max_size=200),
)
def test_unit_queue_evicts_as_popping_one_unit_at_a_time(units, fits):
    """The prefix-sum queue evicts exactly what popping the oldest unit while the window is over
    the limit (or too old) evicts, the newest unit always kept (compactions included: up to 200
    units)."""
    from memdiag.strategies.base import Unit, UnitQueue

    queue, plain, turn = UnitQueue(), [], 0
    for n, (tokens, step) in enumerate(units):
        turn += step
        unit = Unit([n], tokens, turn)
        queue.append(unit)
        plain.append(unit)
        limit, min_turn = fits[n] if n < len(fits) else (10**9, None)
        expected: list[int] = []
        while len(plain) > 1 and (
            sum(u.tokens for u in plain) > limit
            or (min_turn is not None and plain[0].turn < min_turn)
        ):
            expected.extend(plain.pop(0).indices)
        got: list[int] = []
        queue.evict_to(limit, got, min_turn)
        assert got == expected
        assert queue.tokens == sum(u.tokens for u in plain)
        assert list(queue.units) == plain and len(queue) == len(plain)
        assert queue.units[-1] is plain[-1] and queue.units[0] is plain[0]
    assert queue.clear() == [i for u in plain for i in u.indices] and len(queue) == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(60, 400), st.sampled_from(["summary", "scratchpad"]))
def test_turn_records_are_written_as_dumps_writes_them(transcript, budget, name):
    from memdiag.render.jsonout import dumps, turn_json, turn_texts

    res = replay(prepare(transcript, Settings(budget=budget)), name, ["Mia"])
    expected = [("        " + dumps(turn_json(r)).replace("\n", "\n        ")) for r in res.turns]
    assert "".join(turn_texts(res.turns, " " * 8)) == ",\n".join(expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transcripts(),
    st.integers(60, 400),
    st.sampled_from(["sliding_window", "summary", "scratchpad"]),
    st.sampled_from(["Mia", "allergic to peanuts", "名字"]),
)
def test_turn_lines_are_what_json_dumps_writes(transcript, budget, name, fact):
    """`--format jsonl`'s turn lines, written from the columns, are json.dumps of each record
    (ids and sessions of any text, pins, session ends, turns over budget)."""
    import json

    from memdiag.render.jsonout import turn_json, turn_lines

    res = replay(prepare(transcript, Settings(budget=budget)), name, [fact])
    expected = [
        json.dumps({"strategy": name, **turn_json(r)}, ensure_ascii=False) for r in res.turns
    ]
    assert list(turn_lines(res)) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT | st.text(max_size=20) | EDGES, min_size=1, max_size=6), st.data())
def test_line_terms_are_the_text_terms_of_the_whole_text(lines, data):
    from memdiag.facts import LineTerms, text_terms

    terms = LineTerms()
    for _ in range(3):  # lines recur in the next texts, as in a running summary
        text = "\n".join(data.draw(st.permutations(lines)))
        assert terms(text) == text_terms(text)
        lines = [*lines[1:], data.draw(TEXT)]


def test_check_report_from_kept_contexts_equals_a_fresh_one(tmp_path, monkeypatch):
    """check --html replays from the contexts its serial run kept: the same document."""
    import shutil
    from pathlib import Path

    import yaml

    from memdiag.checks.run import check
    from memdiag.render.report import build
    from memdiag.render.report.checks import check_document

    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    for name in ("demo.jsonl", "allergy_zh.jsonl"):
        shutil.copy(fixtures / name, tmp_path / name)
    spec = tmp_path / "checks.yaml"
    cases = [
        {
            "name": f"case {name} {strategy}",
            "transcript": name,
            "strategy": {"name": strategy, "budget": 300},
            "expect": [{"kept": "allergic to peanuts", "at_turn": 3}, {"lost": "花生过敏"}],
        }
        for name in ("demo.jsonl", "allergy_zh.jsonl")
        for strategy in ("sliding_window", "summary")
    ]
    # every expectation at the last turn: the case's own replay is the one the report shows
    cases += [
        {
            "name": f"last turn {name} {strategy} {budget}",
            "transcript": name,
            "strategy": {"name": strategy, "budget": budget},
            "expect": [{"kept": "allergic to peanuts"}, {"lost": "花生过敏"}, {"kept": "Mia"}],
        }
        for name in ("demo.jsonl", "allergy_zh.jsonl")
        for strategy in ("sliding_window", "summary", "scratchpad")
        for budget in (120, 300)
    ]
    spec.write_text(yaml.safe_dump({"version": 1, "cases": cases}, allow_unicode=True), "utf-8")
    kept = check(spec, Settings(), keep_contexts=True)
    plain = check(spec, Settings())
    assert all(c.context is not None for c in kept.cases)
    assert all(c.context is None and not c.replays for c in plain.cases)
    assert any(r.texts.summary or r.texts.pinned for c in kept.cases for r in c.replays)
    calls: list[str] = []
    real = build.replay
    monkeypatch.setattr(
        build, "replay", lambda rctx, name, *a, **k: calls.append(name) or real(rctx, name, *a, **k)
    )
    reused = check_document(spec, Settings(), kept)
    n_reused, calls[:] = len(calls), []
    assert reused == check_document(spec, Settings(), plain)
    assert n_reused == len(calls) - 12 == 4  # the 12 last-turn cases' own replays were shown
    # each case's page shows the strategy it judged, nothing the check did not run
    judged = [c["strategy"]["name"] for c in cases]
    assert [[x["name"] for x in run["strategies"]] for run in reused["runs"]] == [
        [name] for name in judged
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.lists(FACTS, min_size=1, max_size=4, unique=True), st.data())
def test_the_lexical_context_gives_the_words_evidence_without_searching_again(
    transcript, facts, data
):
    """A diagnosis searches a fact's words, then remembers more evidence (semantic, decisive):
    the report's lexical() context gives back what the words found, without a second search,
    as a fresh prepare finds it."""
    rctx = prepare(transcript, Settings(budget=200))
    n = len(transcript.messages)
    for fact in facts:
        if data.draw(st.booleans()):
            rctx.evidence_of(fact)  # searched by its words first, as search_evidence does
        extra = data.draw(st.lists(st.integers(0, max(0, n - 1)), max_size=3)) if n else []
        rctx.remember_evidence(fact, [*rctx._evidence.get(fact, ()), *extra])
    fresh = prepare(transcript, Settings(budget=200))
    words = rctx.lexical()
    for fact in facts:
        if fact in rctx._by_words:
            assert fact in words._evidence  # given back: no second search
        assert words.evidence_of(fact) == fresh.evidence_of(fact)
    assert not words._remembered and not words._by_words


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(60, 400), st.lists(FACTS, min_size=1, max_size=3, unique=True))
def test_a_pickled_context_replays_as_the_original(transcript, budget, facts):
    """A worker's context crosses to the parent (check --jobs --html) with its counts and
    evidence, not its encoding or caches: it replays, counts and finds evidence the same."""
    import pickle

    rctx = prepare(transcript, Settings(budget=budget), memory_tokens=7, memory_text="Mia")
    for fact in facts:
        rctx.evidence_of(fact)
    rctx.remember_evidence("a semantic find", [0])
    back = pickle.loads(pickle.dumps(rctx))
    assert back.costs == tuple(rctx.costs) and back.units == rctx.units
    assert (back.memory_tokens, back.memory_text) == (7, "Mia")
    assert back.counter.encoding.name == rctx.counter.encoding.name
    assert back.lexical()._evidence == rctx.lexical()._evidence
    assert back.evidence_of("a semantic find") == (0,)
    for name in ("sliding_window", "summary", "scratchpad"):
        a, b = replay(rctx, name, facts), replay(back, name, facts)
        assert (a.turns, a.facts, a.final) == (b.turns, b.facts, b.final)


ROW = st.tuples(
    st.lists(st.integers(0, 9), max_size=4),  # entered
    st.lists(st.integers(0, 9), max_size=4),  # evicted
    st.lists(st.integers(0, 9), max_size=4),  # summarized
    st.lists(st.integers(0, 9), max_size=4),  # dropped at a session start
    st.lists(st.integers(0, 10_000), min_size=5, max_size=5),  # tokens but the total
    st.booleans(),  # a pin was set
    st.booleans(),  # over budget
)


@settings(max_examples=80, deadline=None)
@given(st.lists(ROW, max_size=12), st.integers(0, 3))
def test_turn_records_are_the_records_built_directly(rows, first):
    """The compact columns give back exactly the records the engine used to build per turn,
    and their totals (the table's) are those of the records."""
    from memdiag.strategies.base import PinChange
    from memdiag.transcript.model import Message, Turn
    from memdiag.turn_records import SECTIONS, TurnRecord, TurnRecords

    msgs = [Message(i, f"m{i}", "user", "x", "s", i, i) for i in range(10)]
    turns = [Turn(n, f"s{n % 2}", n, n, n + 1) for n in range(1, first + len(rows) + 1)]
    records = TurnRecords(turns, msgs, first)
    expected = []
    for k, (entered, evicted, summarized, dropped, tokens, pinned, over) in enumerate(rows):
        pins = [PinChange("name", f"v{k}", None, "m1")] if pinned else []
        row = (*tokens, sum(tokens))
        records.append(row, entered, evicted, summarized, dropped, pins, over)
        turn = turns[first + k]
        expected.append(
            TurnRecord(
                turn.number,
                turn.session,
                turn.session_turn,
                dict(zip(SECTIONS, row, strict=True)),
                tuple(msgs[i].id for i in entered),
                tuple(msgs[i].id for i in evicted),
                tuple(msgs[i].id for i in summarized),
                tuple(msgs[i].id for i in dropped),
                tuple(pins),
                over,
            )
        )
    assert [records[k] for k in range(len(records))] == expected  # made one at a time
    assert [records[-k] for k in range(1, len(records) + 1)] == expected[::-1]
    with pytest.raises(IndexError):
        records[len(records)]
    assert len(records) == len(expected) and list(records) == expected and records == expected
    assert records[:2] == expected[:2] and [records[k] for k in range(len(records))] == expected
    assert list(records.column("total")) == [r.tokens["total"] for r in expected]
    assert records.count(1) == sum(len(r.evicted) for r in expected)
    assert records.count(2) == sum(len(r.summarized) for r in expected)
    assert [records.changed(k) for k in range(len(records))] == [
        bool(r.evicted or r.summarized or r.pinned or r.overflow or r.dropped_by_session)
        for r in expected
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts())
def test_texts_with_tokens_are_each_messages_text_tokens(transcript):
    from memdiag.strategies.base import StrategyContext

    rctx = prepare(transcript, Settings(budget=400))
    sctx = StrategyContext(transcript, rctx.costs, rctx.counter, rctx.memo)
    every = range(len(transcript.messages))
    assert sctx.texts_with_tokens(every) == [
        (sctx.message(i).role, sctx.text(i), sctx.text_tokens(i)) for i in every
    ]


# texts that recur (a repeated request, a tool's same output), in other case and with questions
# and hypotheticals around the facts' words: what the per-text answers of a run must get right
RECURRING = st.sampled_from(
    [
        "I'm allergic to peanuts.",
        "I'M ALLERGIC TO PEANUTS.",
        "Am I allergic to peanuts?",
        "If I were allergic to peanuts, what then?",
        "My name is Mia and I like a window seat.",
        # a statement and a question: blanking the question leaves the statement
        "I'm allergic to peanuts. Can I get a window seat?",
        "I like a window seat. Am I Mia?",
        "我对花生过敏。",
        "ok",
    ]
)


@st.composite
def recurring_transcripts(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    from memdiag.transcript.model import RawMessage, build

    items = []
    for _ in range(draw(st.integers(1, 14))):
        text = draw(RECURRING | TEXT)
        forgot = "allergic to peanuts" if draw(st.integers(0, 6)) == 0 else None
        items.append(RawMessage(draw(ROLES), text, forgot=forgot))
    return build(items, path="<generated>", format="canonical")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recurring_transcripts() | transcripts(), st.lists(FACTS | TEXT, min_size=1, max_size=4))
def test_word_matches_are_those_of_matching_every_message(transcript, facts):
    rctx = prepare(transcript, Settings(budget=300))
    for fact in facts:
        direct = tuple(
            (m.index, hit)
            for m in transcript.messages
            if m.role in EVIDENCE_ROLES and (hit := match(fact, m.content)) is not None
        )
        assert rctx.word_matches(fact) == direct
        assert rctx.evidence_of(fact) == tuple(i for i, _ in direct)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recurring_transcripts(), st.lists(FACTS, min_size=1, max_size=3), st.data())
def test_stated_before_is_the_search_of_every_message(transcript, facts, data):
    """diagnose's own-words evidence (recurring texts judged once, a statement read once for
    all the run's facts) is what matching every earlier message, and every statement left
    once questions are blanked, gives."""
    from memdiag.diagnosis.evidence import stated_before
    from memdiag.text import mask_non_statements

    rctx = prepare(transcript, Settings(budget=300))
    for fact in facts:
        before = data.draw(st.integers(0, len(transcript.messages)))
        expected = []
        for m in transcript.messages[:before]:
            hit = match(fact, m.content)
            if m.role not in EVIDENCE_ROLES or hit is None or m.forgot:
                continue
            masked = mask_non_statements(m.content)
            if masked == m.content or match(fact, masked) is not None:
                expected.append((m.index, hit.score, hit.method))
        expected.sort(key=lambda e: (-e[1], -e[0]))
        # alone, and asked with every fact of the run (each statement read once for all)
        for run in ((), tuple(dict.fromkeys(facts))):
            got = stated_before(rctx, fact, before, run)
            assert [(e.index, e.score, e.method) for e in got] == expected
            assert all(e.text == transcript.messages[e.index].content for e in got)


@pytest.mark.parametrize("fixture", ["demo.jsonl", "demo_zh.jsonl", "longterm.jsonl"])
@pytest.mark.parametrize("budget", [40, 400])
def test_turn_lines_of_pins_session_ends_and_overflow(fixture, budget):
    """The fixtures under the scratchpad pin facts, end sessions, and (40 tokens) go over
    budget: every branch of the line writer, against json.dumps."""
    import json

    from memdiag.render.jsonout import turn_json, turn_lines
    from memdiag.transcript import load
    from tests.conftest import FIXTURES

    t = load(FIXTURES / fixture)
    res = replay(prepare(t, Settings(budget=budget)), "scratchpad", ["allergic to peanuts"])
    assert res.turns.pins and res.turns.count(3) and (res.turns.overflow or budget == 400)
    expected = [
        json.dumps({"strategy": "scratchpad", **turn_json(r)}, ensure_ascii=False)
        for r in res.turns
    ]
    assert list(turn_lines(res)) == expected
