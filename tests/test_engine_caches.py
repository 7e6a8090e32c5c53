"""The replay engine's run-level caches and indexes give the answers of the direct computation
(docs/engine.md): memoized extraction, shared sentence scores, the term index of evidence."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.config import Settings
from memdiag.extract import default_extractor
from memdiag.facts import TermIndex, fold, match
from memdiag.replay import EVIDENCE_ROLES, prepare, replay
from memdiag.strategies.base import RunMemo
from memdiag.strategies.summarizers import ExtractiveSummarizer
from memdiag.tokens import TokenCounter
from tests.helpers import TEXT, transcripts

ROLES = st.sampled_from(["user", "assistant", "tool"])
MESSAGES = st.lists(st.tuples(ROLES, TEXT), min_size=1, max_size=8)


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
