"""Evidence as a ranking (docs/reference.md#verdicts step 1): fixtures with known gold turns, every
speaker, CJK,
facts of another conversation, the embedding cache, and a property for exact statements."""

from __future__ import annotations

import datetime as dt
import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdiag.ranking import Params, evidence_index, rank_evidence
from memdiag.ranking.cache import EmbeddingCache
from memdiag.ranking.dense import name_stripper, strip_subject
from memdiag.ranking.lexical import terms
from memdiag.ranking.temporal import fact_intervals, parse_date, text_intervals
from memdiag.transcript.formats import load
from memdiag.transcript.model import RawMessage, RawSession, build

from .conftest import FIXTURES, ROOT

DANA = FIXTURES / "evidence" / "dana.jsonl"
LIN = FIXTURES / "evidence" / "lin_zh.jsonl"

# fact → gold message id, in dana.jsonl (written for these tests)
GOLD = {
    # third person, reworded as a memory system writes it
    "Dana has celiac disease and avoids gluten.": "u2",
    "Dana relocated from Chicago.": "u5",
    # stated by the weather tool, not by the user
    "It is going to rain heavily in Portland on Saturday.": "t4",
    # stated by the assistant
    "A table at Luigi's Trattoria is booked for Friday evening.": "a8",
    # dated: "Yesterday I ran ..." said on 2 April 2026
    "Dana ran a half marathon on 1 April 2026.": "u6",
}
# paraphrases that share (almost) no word with their gold turn: the semantic ranker's job
PARAPHRASE = {
    "The user's partner does not eat meat.": "u3",
    "The user moved to a new city recently.": "u5",
}
# facts of another conversation (benchmarks/data/negative_facts.txt holds more)
OTHER = [
    "Priya keeps bees on the roof of her building and sells the honey.",
    "Tomas is studying for the bar exam.",
    "The user is lactose intolerant and avoids cheese.",
]


def _top(ranking, k: int = 3) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.id for c in ranking.candidates[:k]]


@pytest.mark.parametrize("semantic", [False, True], ids=["lexical", "semantic"])
def test_gold_turns_from_every_speaker(semantic: bool, request: pytest.FixtureRequest) -> None:
    if semantic:
        request.getfixturevalue("model_dir")
    t = load(DANA)
    facts = list(GOLD)
    ranked = rank_evidence(t, [(f, None) for f in facts], semantic=semantic)
    for fact, r in zip(facts, ranked, strict=True):
        assert GOLD[fact] in _top(r), (fact, _top(r))
        assert r.stated, (fact, r.reason)
        assert any(c.passes for c in r.candidates[:3])
    by_fact = dict(zip(facts, ranked, strict=True))
    tool = by_fact["It is going to rain heavily in Portland on Saturday."].candidates[0]
    assert (tool.id, tool.method) == ("t4", "lexical")
    # every candidate says how it was found, with every ranker's score
    for r in ranked:
        for c in r.candidates:
            assert c.method in ("exact", "lexical", "semantic", "temporal", "context")
            assert c.scores and all(isinstance(v, float) for v in c.scores.values())
            assert (c.turn, c.session) == (t.message(c.id).turn, t.message(c.id).session)


def test_paraphrases_need_the_semantic_ranker(model_dir: Path) -> None:
    t = load(DANA)
    facts = list(PARAPHRASE)
    semantic = rank_evidence(t, [(f, None) for f in facts])
    lexical = rank_evidence(t, [(f, None) for f in facts], semantic=False)
    for fact, r in zip(facts, semantic, strict=True):
        assert r.candidates[0].id == PARAPHRASE[fact], (fact, _top(r))
        assert r.semantic
    # ranked first; stated only when the cosine reaches the calibrated threshold: the move
    # ("I moved here from Chicago last month") scores 0.33 with MiniLM and stays below it
    partner = semantic[0]
    assert partner.stated and partner.reason.startswith("semantic")
    assert partner.candidates[0].scores["semantic"] >= Params().semantic_threshold
    # without the model no candidate carries a semantic score
    assert all("semantic" not in c.scores for r in lexical for c in r.candidates)


def test_a_date_is_matched_against_the_session_date() -> None:
    t = load(DANA)
    # no word in common with "Yesterday I ran my first half marathon!" but its date
    (r,) = rank_evidence(t, [("Dana completed a race on 1 April 2026.", None)], semantic=False)
    found = {c.id: c for c in r.candidates}
    assert "u6" in found and found["u6"].method == "temporal"
    assert found["u6"].scores["temporal"] == 1.0
    (r,) = rank_evidence(t, [("Dana completed a race on 5 May 2026.", None)], semantic=False)
    assert "u6" not in _top(r, 5)


@pytest.mark.parametrize("semantic", [False, True], ids=["lexical", "semantic"])
def test_facts_of_another_conversation_are_never_stated(
    semantic: bool, request: pytest.FixtureRequest
) -> None:
    if semantic:
        request.getfixturevalue("model_dir")
    t = load(DANA)
    ranked = rank_evidence(t, [(f, None) for f in OTHER], semantic=semantic)
    for r in ranked:
        assert not r.stated, (r.fact, r.reason)
        assert not any(c.passes for c in r.candidates[:3])
        assert r.reason.startswith("best lexical")
        # the ranking is still reported, whatever the absolute scores
        assert len(r.candidates) <= 5


def test_cjk_uses_character_ngrams(model_dir: Path) -> None:
    t = load(LIN)
    facts = {"用户对花生过敏": "u2", "林晓下个月搬去成都": "u3", "用户养了一只猫叫豆豆": "u4"}
    ranked = rank_evidence(t, [(f, None) for f in [*facts, "用户每周去游泳三次"]])
    for r in ranked[:3]:
        assert r.candidates[0].id == facts[r.fact]
        assert r.stated and not r.semantic  # MiniLM is not used on Chinese
        assert r.candidates[0].method == "lexical"
    assert not ranked[3].stated, ranked[3].reason
    assert "u4" in terms_match("用户养了一只猫叫豆豆", t)


def terms_match(fact: str, t) -> list[str]:  # type: ignore[no-untyped-def]
    fact_terms = set(terms(fact))
    return [m.id for m in t.messages if fact_terms & set(terms(m.content))]


def test_before_limits_the_search() -> None:
    t = load(DANA)
    fact = "I can't eat anything with gluten"
    u2 = t.message("u2").index
    (after, before) = rank_evidence(t, [(fact, None), (fact, u2)], semantic=False)
    assert after.candidates[0].id == "u2" and after.candidates[0].method == "exact"
    assert all(t.message(c.id).index < u2 for c in before.candidates)
    assert before.searched < after.searched


# --- cost: one embedding per text per run, cached across runs ---------------------------


def test_cache_makes_the_second_run_free(model_dir: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(tmp_path / "cache"))
    t = load(DANA)
    facts = [(f, None) for f in [*GOLD, *OTHER]]
    first, _ = evidence_index(t)
    a = first.rank(facts)
    assert first.stats.embedded == first.stats.sentences > 0  # each sentence once, all facts
    assert first.cache is not None and first.cache.path.is_relative_to(tmp_path / "cache")
    first.cache.close()
    second, _ = evidence_index(t)
    b = second.rank(facts)
    assert second.stats.embedded == 0 and second.stats.sentences == first.stats.sentences
    assert [[c.id for c in r.candidates] for r in a] == [[c.id for c in r.candidates] for r in b]
    uncached, _ = evidence_index(t, cache=False)
    uncached.rank(facts[:1])
    assert uncached.cache is None and uncached.stats.embedded == first.stats.sentences


def test_cache_that_cannot_be_written_is_switched_off(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = EmbeddingCache("m", blocker)
    assert cache.error is not None and "cache off" in cache.error
    assert cache.get(["a"]) == [None]
    cache.put(["a"], __import__("numpy").zeros((1, 3), dtype="float32"))  # no error


def test_cache_follows_the_user_cache_dir(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("MEMDIAG_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert EmbeddingCache("m").path.parent == tmp_path / "xdg" / "memdiag" / "embeddings"
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(tmp_path / "mine"))
    assert EmbeddingCache("m").path.parent == tmp_path / "mine" / "embeddings"
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", "")  # empty: no cache at all
    off = EmbeddingCache("m")
    assert off.error is not None and off.get(["a"]) == [None]


def test_fast_minilm_gives_chromadb_vectors(model_dir: Path) -> None:
    import numpy as np

    from memdiag.ranking.minilm import MiniLM
    from memdiag.stores.embeddings import default_embedder

    texts = ["Hi", "I can't eat anything with gluten. " * 3, "Heavy rain in Portland", "ok"]
    ours = MiniLM(model_dir)(texts)
    chroma, _ = default_embedder()
    assert chroma is not None
    theirs = chroma(texts)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    assert float((ours * theirs).sum(1).min()) > 0.9999


def test_minilm_batches_in_parallel_give_the_same_vectors(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches run side by side on one thread per core: the vectors are bit for bit those of
    one thread running every batch in turn, each row where its text was."""
    import threading

    import numpy as np

    from memdiag.ranking import minilm

    texts = [f"Sentence {n} about {'rain ' * (n % 7)}in Portland." for n in range(70)]
    monkeypatch.setattr(minilm, "_workers", lambda: 3)
    seen: set[int] = set()
    real = minilm._in_parallel

    def spy(run: object, batches: list[list[int]]) -> None:
        def recorded(rows: list[int]) -> None:
            seen.add(threading.get_ident())
            run(rows)  # type: ignore[operator]

        real(recorded, batches)

    monkeypatch.setattr(minilm, "_in_parallel", spy)
    parallel = minilm.MiniLM(model_dir)(texts)
    assert len(seen) > 1  # 70 texts are 5 batches: more than one thread ran them
    monkeypatch.setattr(minilm, "_workers", lambda: 1)
    alone = minilm.MiniLM(model_dir)(texts)
    assert np.array_equal(parallel, alone)
    single = minilm.MiniLM(model_dir)([texts[41]])
    assert np.allclose(single[0], alone[41], atol=1e-5)


def test_parallel_batches_raise_the_first_error() -> None:
    import threading

    from memdiag.ranking.minilm import _in_parallel

    done: list[int] = []

    def run(rows: list[int]) -> None:
        if rows == [3]:
            raise ValueError("batch 3")
        done.append(rows[0])

    before = threading.active_count()
    with pytest.raises(ValueError, match="batch 3"):
        _in_parallel(run, [[n] for n in range(8)])
    assert 3 not in done
    assert threading.active_count() == before  # every helper thread has stopped


# --- parts ---------------------------------------------------------------------------------


def test_dates_of_sessions_and_facts() -> None:
    assert parse_date("1:56 pm on 8 May, 2023") == dt.date(2023, 5, 8)
    assert parse_date("2023/05/20 (Sat) 02:21") == dt.date(2023, 5, 20)
    assert parse_date("2026-04-02T08:30:00Z") == dt.date(2026, 4, 2)
    assert parse_date("soon") is None
    assert fact_intervals("went there in May 2023") == (
        (dt.date(2023, 5, 1), dt.date(2023, 5, 31)),
    )
    assert fact_intervals("in 2022") == ((dt.date(2022, 1, 1), dt.date(2022, 12, 31)),)
    (lo, hi) = fact_intervals("The week before 9 June 2023")[0]
    assert lo < dt.date(2023, 6, 9) == hi
    saturday = dt.date(2023, 5, 8)  # a Monday
    said = text_intervals("Last Saturday we went camping, and yesterday too", saturday)
    assert (dt.date(2023, 5, 6), dt.date(2023, 5, 6)) in said
    assert (dt.date(2023, 5, 7), dt.date(2023, 5, 7)) in said
    assert text_intervals("I painted it last year", saturday) == (
        (dt.date(2022, 1, 1), dt.date(2022, 12, 31)),
    )


def test_names_are_left_out_of_embeddings() -> None:
    strip = name_stripper(["Caroline", "Melanie"])
    assert strip("Wow, Caroline, that painting is awesome!") == "Wow, that painting is awesome!"
    assert strip("Caroline's painting") == "painting"
    assert strip_subject("Dana moved from Chicago.") == "moved from Chicago."
    assert strip_subject("The user moved.") == "The user moved."


# --- the property --------------------------------------------------------------------------

NOISE = st.lists(
    st.lists(
        st.sampled_from(
            "weather train museum ticket coffee laptop garden piano soccer river mountain "
            "bicycle window budget office printer sandwich concert jacket lamp".split()
        ),
        min_size=1,
        max_size=12,
    ).map(" ".join),
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(noise=NOISE, where=st.lists(st.integers(min_value=0, max_value=100), max_size=30))
def test_unrelated_messages_never_push_an_exact_statement_out_of_the_top3(
    noise: list[str], where: list[int]
) -> None:
    base = load(DANA)
    items: list = [RawSession("mar", ts="2026-03-12T18:00:00Z")]
    msgs = [
        RawMessage(m.role, m.content, id=m.id, tool_call_id=m.tool_call_id, tool_calls=m.tool_calls)
        for m in base.messages
        if m.role != "system"
    ]
    for k, text in enumerate(noise):
        at = where[k] % (len(msgs) + 1) if k < len(where) else len(msgs)
        msgs.insert(at, RawMessage("user" if k % 2 else "assistant", text, id=f"n{k}"))
    t = build([*items, *msgs], path="noise", format="canonical")
    fact = "I moved here from Chicago last month"
    (r,) = rank_evidence(t, [(fact, None)], semantic=False)
    assert "u5" in _top(r) and r.stated


# --- the dev conversation (LoCoMo, not shipped) ---------------------------------------------


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "bench_evidence", ROOT / "benchmarks" / "bench_evidence.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_dev_conversation_beats_plain_bm25() -> None:
    bench = _bench()
    if not bench.DEV.is_file():
        pytest.skip(f"LoCoMo dev conversation not found at {bench.DEV} (CC BY-NC, not shipped)")
    t, probes = bench.dev_probes(bench.DEV)
    index, _ = evidence_index(t, semantic=False)
    ranked = index.rank([(f, None) for _, f, _ in probes], top=3)
    ours = bench.recall(
        [
            (lab, [c.id for c in r.candidates], g)
            for (lab, _, g), r in zip(probes, ranked, strict=True)
        ]
    )
    bm25 = bench.PlainBM25(t.messages)
    base = bench.recall([(lab, bm25.top_ids(f, 3), g) for lab, f, g in probes])
    assert ours["observation"][1] >= 0.9
    total = sum(ours[k][1] * ours[k][2] for k in ours)
    assert total > sum(base[k][1] * base[k][2] for k in base)


def test_streamed_batches_give_the_same_scores(model_dir: Path) -> None:
    import numpy as np

    from memdiag.ranking.dense import dense_scores
    from memdiag.ranking.minilm import MiniLM

    t = load(DANA)
    contents = [m.content for m in t.messages] + ["Perfect, thanks."] * 3  # said again
    facts = [*GOLD, "用户对花生过敏"]
    model = MiniLM(model_dir)
    small, stats = dense_scores(facts, contents, model, batch=2)
    large, _ = dense_scores(facts, contents, model, batch=10_000)
    assert np.allclose(small, large, atol=1e-5)
    assert stats.embedded == stats.sentences  # no cache: each distinct sentence once
    assert (small[-1] == -1.0).all()  # a Chinese fact gets no dense score


# --- through the CLI -----------------------------------------------------------------------


def test_diagnose_json_lists_ranked_candidates(
    model_dir: Path, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    import json

    from typer.testing import CliRunner

    from memdiag.cli import app

    cache = tmp_path / "cache"
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(cache))
    args = ["diagnose", str(DANA), "--format", "json", "--at", "8"]
    facts = ["--fact", "Dana relocated from Chicago.", "--fact", "Tomas is studying law."]
    first = CliRunner().invoke(app, [*args, *facts, "--no-cache"])
    assert first.exit_code in (0, 1), first.output
    assert not (cache / "embeddings").exists()  # --no-cache: no embedding written
    moved, other = json.loads(first.stdout)["diagnoses"]
    assert moved["evidence"][0]["id"] == "u5" and moved["verdict"] != "never_stated"
    for e in moved["evidence"]:
        assert {"score", "method", "stated", "scores"} <= set(e)
    assert other["verdict"] == "never_stated" and other["evidence"]  # nearest, not stated
    assert not any(e["stated"] for e in other["evidence"])
    assert "cache off" in other["details"]["semantic_search"]
    filled = CliRunner().invoke(app, [*args, *facts])
    assert any((cache / "embeddings").rglob("*.sqlite"))
    again = CliRunner().invoke(app, [*args, *facts])
    # the JSON is the same bytes whether the embeddings were computed or read from the cache
    # (docs/reference.md#json-output); the ranking's own counts show the cache was used
    assert again.stdout == filled.stdout
    note = json.loads(again.stdout)["diagnoses"][0]["details"]["semantic_search"]
    assert note.endswith("sentences of every speaker compared")
    from memdiag.replay import EVIDENCE_ROLES

    t = load(DANA)
    index, _ = evidence_index(t, roles=EVIDENCE_ROLES)
    try:
        index.rank([("Dana relocated from Chicago.", t.turn(8).user_index + 1)])
    finally:
        assert index.cache is not None
        index.cache.close()
    assert index.stats.sentences > 0 and index.stats.embedded == 0


def test_only_the_most_recent_messages_are_embedded(model_dir: Path) -> None:
    from memdiag.ranking import Params

    t = load(DANA)
    index, _ = evidence_index(t, cache=False, params=Params(dense_max_messages=4))
    (r,) = index.rank([("Dana ran a half marathon on 1 April 2026.", None)])
    assert index.stats.dense_from == len(index.messages) - 4
    old = {m.index for m in index.messages[: index.stats.dense_from]}
    for c in r.candidates:
        assert ("semantic" in c.scores) == (c.index not in old)
    assert r.candidates[0].id == "u6"


def test_the_sentence_bound_takes_whole_messages_newest_first() -> None:
    """dense_max_sentences: newest first, a message whose new distinct sentences do not fit is
    left out and an older one that fits is still taken; a sentence said again costs nothing."""
    from memdiag.ranking.dense import _judged_units

    contents = [
        "Alpha is here. Beta is there.",  # {alpha, beta}: beta is new, and fits
        "Gamma runs fast. Delta runs slow. Epsilon sleeps.",  # three new: 1 + 3 > 3
        "Alpha is here.",  # the newest: one new sentence
    ]
    units, left_out = _judged_units(contents, str, False, 3)
    assert left_out == 1
    assert [(pos, text) for pos, text, _ in units] == [
        (0, "Alpha is here."),
        (0, "Beta is there."),
        (2, "Alpha is here."),
    ]
    every, none_out = _judged_units(contents, str, False, None)
    assert none_out == 0 and [pos for pos, _, _ in every] == [0, 0, 1, 1, 1, 2]
    assert _judged_units(contents, str, False, 5) == (every, 0)  # five distinct: all fit


def test_a_tool_output_past_the_sentence_bound_is_ranked_by_its_words(model_dir: Path) -> None:
    """A long tool output at the end (a log of 60 distinct lines) with a bound of 30 sentences:
    it is left out of the model's work, the user's paraphrase before it is still embedded and
    ranked first, and the note says how many messages were ranked by their words only."""
    from memdiag.diagnosis.evidence import semantic_note

    log = " ".join(f"Step {k} of the build finished in {k + 3} seconds." for k in range(60))
    raw = [
        RawMessage("user", "I packed up everything and moved to Denver last month.", id="u1"),
        RawMessage("assistant", "Welcome to Denver! How can I help?", id="a1"),
        RawMessage("user", "Please run the build for my project.", id="u2"),
        RawMessage("tool", log, id="t1"),
    ]
    t = build(raw, path="t.jsonl", format="canonical")
    fact = "The user relocated to a new city recently."
    bounded, _ = evidence_index(t, cache=False, params=Params(dense_max_sentences=30))
    (r,) = bounded.rank([(fact, None)])
    assert bounded.stats.dense_left_out == 1 and bounded.stats.dense_from == 0
    assert bounded.stats.sentences <= 30
    assert r.candidates[0].id == "u1" and "semantic" in r.candidates[0].scores
    assert all("semantic" not in c.scores for c in r.candidates if c.id == "t1")
    note = semantic_note(bounded.stats, bounded.params, cached=False)
    assert note.endswith(
        "; 1 more by their words only (past the 30 sentences the model compares, newest first)"
    )
    whole, _ = evidence_index(t, cache=False)
    (w,) = whole.rank([(fact, None)])
    assert whole.stats.dense_left_out == 0 and whole.stats.sentences > 60
    assert any("semantic" in c.scores for c in w.candidates if c.id == "t1")
    assert "more by their words only" not in semantic_note(whole.stats, whole.params, False)


# --- a question states nothing ---------------------------------------------------------------

ASKED = [
    RawMessage("user", "Hi, I'm Mia. I'm flying to Lisbon on Friday.", id="u1"),
    RawMessage("assistant", "Great, have a good trip.", id="a1"),
    RawMessage("user", "Can I pick seats when I check in?", id="u2"),
    RawMessage("assistant", "Usually, yes: online check-in opens 24 hours before.", id="a2"),
    RawMessage("user", "Which seat should I pick for the flight?", id="u3"),
]


@pytest.mark.parametrize("semantic", [False, True], ids=["lexical", "semantic"])
def test_a_question_never_states_the_fact(semantic: bool, request: pytest.FixtureRequest) -> None:
    """ "Can I pick seats when I check in?" is near "prefers window seats" (cosine 0.57 on a
    real stack) but asks, so the fact stays never stated; the question is still ranked."""
    if semantic:
        request.getfixturevalue("model_dir")
    t = build(ASKED, path="asked", format="canonical")
    facts = [("prefers window seats", None), ("Which seat should I pick for the flight", None)]
    seats, own_words = rank_evidence(t, facts, semantic=semantic, cache=False)
    assert not seats.stated, seats.reason
    assert not any(c.passes for c in seats.candidates)
    assert "u2" in _top(seats, 5) or "u3" in _top(seats, 5)
    # even the question's own words, exactly: asked, not stated
    assert not own_words.stated, own_words.reason
    assert own_words.candidates[0].id == "u3" and "exact" in own_words.candidates[0].scores
    # a statement after the same question does state it
    said = [*ASKED, RawMessage("user", "I prefer window seats, by the way.", id="u4")]
    (r,) = rank_evidence(
        build(said, path="said", format="canonical"), facts[:1], cache=False, semantic=semantic
    )
    assert r.stated and r.candidates[0].id == "u4"


def test_equal_lexical_scores_rank_the_later_message_first() -> None:
    """Messages that score alike for the lexical ranker come later first: with reciprocal-rank
    fusion their rank alone tells them apart, so the order of the lexical ranking shows."""
    items = []
    for k in range(4):
        items += [
            RawSession(f"s{k}"),
            RawMessage("user", "I keep bees on the roof", id=f"u{k}"),
            RawMessage("assistant", "Noted.", id=f"a{k}"),
        ]
    t = build(items, path="<bees>", format="canonical")
    for fusion in ("rrf", "linear"):
        index, _ = evidence_index(t, semantic=False, params=Params(fusion=fusion))
        (ranking,) = index.rank([("bees on the roof", None)], top=4)
        assert [c.id for c in ranking.candidates] == ["u3", "u2", "u1", "u0"]
        scores = [c.score for c in ranking.candidates]
        assert scores == sorted(scores, reverse=True)
        if fusion == "rrf":  # the rank alone sets the lexical share: strictly decreasing
            assert len(set(scores)) == 4
        assert all(c.scores["lexical"] == 1.0 for c in ranking.candidates)


BM25_TEXTS = st.lists(
    st.sampled_from(
        ["allergic", "allergies", "peanuts", "the", "I", "am", "花生过敏", "我对花生", "Mia", "mia"]
    ),
    max_size=12,
).map(" ".join) | st.text(max_size=20)


@settings(max_examples=150, deadline=None)
@given(st.lists(BM25_TEXTS, max_size=8), st.lists(BM25_TEXTS, min_size=1, max_size=4), st.data())
def test_bm25_scores_are_the_formula_whatever_the_queries_before(texts, queries, data) -> None:
    """BM25Index.score keeps each term's share of each document for the run: a query (with
    any limit) scores as Okapi BM25 written out does, after any queries before it."""
    from memdiag.ranking.lexical import K1, BM25Index
    from memdiag.text import normalize

    index = BM25Index.of_normalized([normalize(t) for t in texts])
    for query in queries:
        q = terms(query)
        limit = data.draw(st.none() | st.integers(0, len(texts)))
        distinct = list(dict.fromkeys(q))
        weights = {t: index.idf(t) for t in distinct}
        bm25: dict[int, float] = {}
        covered: dict[int, float] = {}
        for term in distinct:
            w = weights[term]
            for pos, tf in index._postings(term):
                if limit is not None and pos >= limit:
                    break
                bm25[pos] = bm25.get(pos, 0.0) + w * tf * (K1 + 1.0) / (tf + index._norms[pos])
                covered[pos] = covered.get(pos, 0.0) + w
        got = index.score(q, limit)
        assert got.bm25 == bm25 and list(got.bm25) == list(bm25)
        total = sum(weights.values())
        assert {p: got.coverage(p) for p in got.bm25} == {p: c / total for p, c in covered.items()}


@settings(max_examples=150, deadline=None)
@given(st.lists(BM25_TEXTS, max_size=8), st.lists(BM25_TEXTS, min_size=1, max_size=3), st.data())
def test_the_lazy_lexical_index_scores_as_the_eager_one(texts, queries, data) -> None:
    """BM25Index.of_normalized (postings found when asked, lengths counted without stemming)
    gives the scores, coverage and IDF of the index built from every document's terms."""
    from memdiag.ranking.lexical import BM25Index, normalized_terms
    from memdiag.text import normalize

    norms = [normalize(t) for t in texts]
    eager = BM25Index(normalized_terms(n) for n in norms)
    lazy = BM25Index.of_normalized(norms)
    assert (lazy.size, lazy.avg_length) == (eager.size, eager.avg_length)
    for query in queries:
        q = terms(query)
        limit = data.draw(st.none() | st.integers(0, len(texts)))
        got, want = lazy.score(q, limit), eager.score(q, limit)
        assert got == want
        assert [got.coverage(p) for p in got.bm25] == [want.coverage(p) for p in want.bm25]
        assert list(got.bm25) == list(want.bm25)  # the order the ranker's ties depend on
        assert [lazy.idf(t) for t in q] == [eager.idf(t) for t in q]


CJK_MIXED = st.text(
    # CJK stopwords and others, kana, Hangul, fullwidth letters and commas, a combining accent
    alphabet=st.sampled_from([*"ab Mia 我的了是花生过敏对ソウル한국ｆｕｌｌ，。!?_1é\n", "\u0301"]),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(CJK_MIXED | BM25_TEXTS)
def test_a_documents_length_is_its_number_of_terms(text) -> None:
    """The lazy index counts a document's terms without stemming or slicing CJK runs: the
    count equals that of the terms themselves (CJK stopwords, mixed words, accents)."""
    from memdiag.ranking.lexical import _WORD, _length, _words, normalized_terms
    from memdiag.text import normalize

    norm = normalize(text)
    assert _words(norm) == _WORD.findall(norm)  # the words, split at the spaces
    assert _length(norm) == len(normalized_terms(norm))


@settings(max_examples=300, deadline=None)
@given(CJK_MIXED | st.text(max_size=40) | st.text(st.characters(max_codepoint=127), max_size=40))
def test_normalize_turns_each_run_of_non_word_characters_into_one_space(text) -> None:
    """normalize's one pass equals its definition: punctuation to spaces, whitespace collapsed,
    the edges stripped (any character: control, separator, symbol, combining mark; an ASCII
    text takes the translated path)."""
    import re

    from memdiag.text import fold, normalize

    two_steps = re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", fold(text))).strip()
    assert normalize(text) == two_steps


def test_progress_counts_every_distinct_text_embedded_or_cached(
    model_dir: Path, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(tmp_path / "cache"))
    t = load(DANA)
    facts = [(f, None) for f in GOLD]
    for run in ("cold", "warm"):
        seen: list[tuple[int, int]] = []
        index, _ = evidence_index(t)
        index.rank(facts, progress=lambda done, total, seen=seen: seen.append((done, total)))
        assert index.cache is not None
        index.cache.close()
        totals = {total for _, total in seen}
        # one total: the facts and the distinct sentences, whether embedded or found in the cache
        assert totals == {len(GOLD) + index.stats.sentences}, run
        done = [d for d, _ in seen]
        assert done == sorted(done) and done[-1] == len(GOLD) + index.stats.sentences, run
        if run == "warm":  # all from the cache: reported at once, not per model batch
            assert index.stats.embedded == 0 and len(seen) <= 2
