from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.config import Settings
from memdiag.diagnosis import Failure, diagnose, failures_from, kept_at
from memdiag.errors import UsageError
from memdiag.replay import prepare
from memdiag.transcript import load
from tests.conftest import FIXTURES
from tests.helpers import transcripts

DEMO = FIXTURES / "demo.jsonl"
DEMO_ZH = FIXTURES / "demo_zh.jsonl"


def _short(d):
    assert d.details.short_term is not None
    return d.details.short_term


def _what_if(d):
    assert _short(d).what_if is not None
    return _short(d).what_if


def _probe(d):
    assert d.details.probe is not None
    return d.details.probe


def run(path, budget, facts=(), at=None, **over):
    t = load(path)
    settings = Settings(budget=budget).with_overrides(**over)
    return diagnose(t, settings, failures_from(t, facts, at))


def test_markers_each_diagnosed():
    ds = run(DEMO, 400)
    assert [(d.fact, d.at_turn, d.marker_id) for d in ds] == [
        ("allergic to peanuts", 8, "a8"),
        ("prefers window seats", 9, "a9"),
    ]


def test_short_term_dropped_with_evidence_and_eviction_turn():
    d = run(DEMO, 400)[0]
    assert d.verdict == "short_term_dropped" and d.layer == "short_term"
    assert d.evidence[0].id == "u1" and d.evidence[0].method == "exact"
    assert d.details.lost_at_turn == 6 and d.details.mechanism == "evicted"


def test_long_term_not_written_without_store():
    d = run(DEMO, 400)[1]
    assert d.verdict == "long_term_not_written" and d.layer == "long_term"
    assert "no_store_checked" in d.flags
    assert d.evidence[0].id == "u3" and d.evidence[0].session == "mon"


def test_in_context_when_budget_is_large():
    d = run(DEMO, 5000)[0]
    assert d.verdict == "in_context" and d.layer == "none"
    assert d.details.kept_by == "verbatim"


def test_never_stated():
    d = run(DEMO, 400, facts=["vegetarian diet"], at=8)[0]
    assert d.verdict == "never_stated" and d.layer == "none"
    # the best candidates are still reported (docs/reference.md#verdicts step 1), none close enough
    # to count
    assert not any(e.passes for e in d.evidence)
    assert "vegetarian" not in " ".join(e.text for e in d.evidence).lower()


def test_fact_after_failure_turn_is_not_evidence():
    # u9 asks about the seat in session 2; asking at turn 1 nothing about seats was said yet
    d = run(DEMO, 400, facts=["prefer window seats"], at=1)[0]
    assert d.verdict == "never_stated"


def test_chinese_short_and_long_term():
    short, long_ = run(DEMO_ZH, 300)
    assert short.verdict == "short_term_dropped"
    assert short.evidence[0].id == "u1" and short.details.lost_at_turn == 7
    assert long_.verdict == "long_term_not_written" and long_.evidence[0].id == "u3"


def test_what_if_budget_is_exact():
    """Replaying at the suggested budget keeps the fact; one token less loses it."""
    d = run(DEMO, 400)[0]
    budget = _what_if(d).smallest_sliding_window_budget
    assert budget is not None and budget > 400
    rctx = prepare(load(DEMO), Settings(budget=400))
    assert kept_at(rctx, "sliding_window", d.fact, 8, budget)
    assert not kept_at(rctx, "sliding_window", d.fact, 8, budget - 1)
    assert any(str(budget) in f for f in d.fixes)


def test_what_if_none_when_max_turns_evicts():
    d = run(DEMO, 400, **{"sliding_window.max_turns": 2})[0]
    assert d.verdict == "short_term_dropped"
    assert _what_if(d).smallest_sliding_window_budget is None


def test_conflict_in_context_flag(tmp_path):
    p = tmp_path / "c.jsonl"
    lines = [
        {"role": "user", "content": "I live in Berlin."},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Actually I live in Lisbon now."},
        {
            "role": "assistant",
            "content": "Weather in Berlin is cold.",
            "forgot": "I live in Lisbon",
        },
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines))
    t = load(p)
    d = diagnose(t, Settings(budget=1000), failures_from(t))[0]
    assert d.verdict == "in_context"
    assert "conflict_in_context" in d.flags and _short(d).conflicting_ids == ("m1",)


def test_at_out_of_range_and_no_markers():
    t = load(DEMO)
    with pytest.raises(UsageError, match=r"turns 1\.\.10"):
        failures_from(t, ["x"], 11)
    with pytest.raises(UsageError, match="--at needs --fact"):
        failures_from(t, (), 3)
    assert failures_from(t, ["x"]) == [Failure("x", 10)]


ALLERGY = FIXTURES / "allergy.jsonl"


def test_summarized_away_by_recorded_summary():
    d = run(ALLERGY, 1500, strategy="summary", **{"summary.summarizer": "recorded"})[0]
    assert d.verdict == "short_term_summarized_away" and d.layer == "short_term"
    assert d.details.mechanism == "summarized_away" and d.details.lost_at_turn == 23
    assert _what_if(d).kept_by_strategy["scratchpad"] is True
    assert any("Pin it" in f for f in d.fixes)


def test_extractive_summary_keeps_allergy_in_context():
    d = run(ALLERGY, 800, strategy="summary")[0]
    assert d.verdict == "in_context" and d.details.kept_by == "summary"


def test_scratchpad_keeps_allergy_pinned():
    d = run(ALLERGY, 800, strategy="scratchpad")[0]
    assert d.verdict == "in_context" and d.details.kept_by == "pinned"


def test_semantic_fallback_finds_a_paraphrase(model_dir):
    """No shared words with "I prefer window seats", but the meaning is the same (cos 0.60)."""
    paraphrase, unrelated = run(
        DEMO, 400, facts=["likes sitting by the window on planes", "vegetarian"], at=8
    )
    assert paraphrase.verdict == "short_term_dropped"
    best = paraphrase.evidence[0]
    assert best.id == "u3" and best.passes and best.scores["semantic"] >= 0.47
    assert paraphrase.details.lost_at_turn == 6  # the replay follows the semantic evidence
    assert unrelated.verdict == "never_stated"
    assert "sentences of every speaker compared" in (unrelated.details.semantic_search or "")


def test_semantic_fallback_says_why_it_was_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", str(tmp_path / "none"))
    d = run(DEMO, 400, facts=["vegetarian"], at=8)[0]
    assert d.verdict == "never_stated"
    # short: the model and how to get it are named once per run (the CLI's note, docs/model.md)
    assert d.details.semantic_search == "skipped: the embedding model is not installed"


def test_probes_use_the_datasets_evidence():
    from memdiag.diagnosis import failures_from_probes

    t = load(FIXTURES / "formats" / "locomo_sample.json")
    failures, left_out = failures_from_probes(t, str(FIXTURES / "formats" / "locomo_sample.json"))
    assert left_out == 1  # the adversarial item without an answer
    ds = {d.fact: d for d in diagnose(t, Settings(budget=5000), failures)}
    # session 1 facts are long-term by the time LoCoMo asks (after the last turn) ...
    assert ds["shellfish"].verdict == "long_term_not_written"
    assert [(e.id, e.method) for e in ds["shellfish"].evidence] == [("D1:3", "given")]
    # ... while the last session's are still in the window
    assert ds["Porto"].verdict == "in_context"
    assert _probe(ds["Porto"]).question


def test_probes_cli(tmp_path):
    from typer.testing import CliRunner

    from memdiag.cli import app

    lme = str(FIXTURES / "formats" / "longmemeval_sample.json")
    r = CliRunner().invoke(app, ["diagnose", lme, "--probes", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["diagnoses"][0]
    assert d["verdict"] == "long_term_not_written" and d["evidence"][0]["method"] == "given"
    assert d["details"]["probe"]["question"] == "What is the name of the dog I adopted?"
    assert CliRunner().invoke(app, ["diagnose", str(DEMO), "--probes"]).exit_code == 2
    assert CliRunner().invoke(app, ["diagnose", lme, "--probes", "--fact", "x"]).exit_code == 2


def test_what_if_budget_is_minimal_even_after_a_huge_first_message(tmp_path):
    """A long message in an earlier session must not raise the searched budget's floor."""
    p = tmp_path / "t.jsonl"
    lines = [
        {"role": "user", "content": "Here is my whole diary. " * 400, "session": "s1"},
        {"role": "assistant", "content": "Thanks."},
        {"type": "session", "id": "s2"},
        {"id": "u1", "role": "user", "content": "I'm allergic to peanuts."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Plan a day in Porto with lunch."},
        {"role": "assistant", "content": "Morning at Livraria Lello, lunch at Mercado do Bolhão."},
        {"role": "user", "content": "Any snack for the train?"},
        {"role": "assistant", "content": "Peanut brittle!", "forgot": "allergic to peanuts"},
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines))
    t = load(p)
    d = diagnose(t, Settings(budget=40), failures_from(t))[0]
    assert d.verdict == "short_term_dropped"
    budget = _what_if(d).smallest_sliding_window_budget
    rctx = prepare(t, Settings(budget=40))
    assert budget < 400  # far below the diary's cost
    assert kept_at(rctx, "sliding_window", d.fact, d.at_turn, budget)
    assert not kept_at(rctx, "sliding_window", d.fact, d.at_turn, budget - 1)


def _searched_budget(rctx, fact: str, turn: int) -> int | None:
    """The smallest sliding budget by binary search alone (what smallest_budget did before it
    read the answer off one replay)."""
    from memdiag.diagnosis.short_term import fits_everything, searched_budget

    hi = fits_everything(rctx)
    if not kept_at(rctx, "sliding_window", fact, turn, hi):
        return None
    return searched_budget(rctx, fact, turn, hi)


@given(
    transcripts(),
    st.sampled_from(["allergic to peanuts", "Mia", "window seat", "peanuts"]),
    st.data(),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_smallest_budget_is_the_binary_search(transcript, fact, data):
    from memdiag.diagnosis import smallest_budget

    over = {
        "sliding_window.max_turns": data.draw(st.none() | st.integers(1, 6)),
        "keep_system": data.draw(st.booleans()),
    }
    memory = data.draw(st.sampled_from(["", "User profile: allergic to peanuts.", "Likes tea."]))
    rctx = prepare(
        transcript,
        Settings(budget=200).with_overrides(**over),
        memory_tokens=len(memory) // 4,
        memory_text=memory,
    )
    if data.draw(st.booleans()):  # the fact stated by a message its words do not match
        rctx.remember_evidence(fact, [data.draw(st.integers(0, len(transcript.messages) - 1))])
    turn = data.draw(st.integers(1, len(transcript.turns)))
    assert smallest_budget(rctx, fact, turn) == _searched_budget(rctx, fact, turn)


def test_smallest_budget_is_read_off_one_replay(monkeypatch):
    """On the demo the answer needs three replays (everything fitting, the answer, one token
    less), not a binary search over the budget."""
    import memdiag.diagnosis.short_term as st_mod

    t = load(DEMO)
    rctx = prepare(t, Settings(budget=400))
    expected = _searched_budget(rctx, "allergic to peanuts", 8)
    calls = []
    real = st_mod.replay
    monkeypatch.setattr(st_mod, "replay", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert st_mod.smallest_budget(rctx, "allergic to peanuts", 8) == expected
    assert expected is not None and len(calls) == 3


BATCHED_FACTS = [
    "allergic to peanuts",
    "prefer window seats",
    "I live in Berlin",
    "vegetarian",
    "allergic to peanuts",  # the same fact again, at another turn below
]
BATCHED_FACTS_ZH = ["我对花生过敏", "机票两千以内", "我住在北京", "素食", "我对花生过敏"]


@pytest.mark.parametrize("strategy", ["sliding_window", "summary", "scratchpad"])
@pytest.mark.parametrize("path", [DEMO, ALLERGY, FIXTURES / "longterm.jsonl", DEMO_ZH])
def test_many_facts_at_one_turn_are_each_diagnosed_as_alone(path, strategy, tmp_path, monkeypatch):
    """The failures at one turn share one replay of its session (short_term._tracked):
    each diagnosis is the one of its failure diagnosed alone, what-if included. (Lexical
    evidence: the dense ranker's scores are normalized over the messages the whole run
    embeds, which a run of facts at later turns makes more.)"""
    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", str(tmp_path / "no-model"))
    t = load(path)
    settings = Settings(budget=300, strategy=strategy)
    last = len(t.turns)
    facts = BATCHED_FACTS_ZH if path == DEMO_ZH else BATCHED_FACTS
    failures = [Failure(f, last) for f in facts[:-1]]
    failures.append(Failure(facts[-1], max(1, last - 2)))
    together = [_judged(d) for d in diagnose(t, settings, failures)]
    alone = [_judged(diagnose(t, settings, [f])[0]) for f in failures]
    assert together == alone
    assert len({d["verdict"] for d in together}) > 1  # facts of different fates


def test_the_what_ifs_of_one_turn_share_their_replays(tmp_path, monkeypatch):
    """The failures at one turn replay each strategy at the run's budget, and the sliding
    window under the budget that fits everything, once for all of them (the what-ifs of each
    lost fact read their survival off those replays); only a fact's own budget search is its
    own."""
    import memdiag.diagnosis.short_term as st_mod

    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", str(tmp_path / "no-model"))
    t = load(DEMO)
    settings = Settings(budget=300)
    calls: list[tuple[str, int, tuple[str, ...]]] = []
    real = st_mod.replay

    def counted(rctx, strategy, facts, **kw):  # type: ignore[no-untyped-def]
        calls.append((strategy, rctx.budget, tuple(facts)))
        return real(rctx, strategy, facts, **kw)

    monkeypatch.setattr(st_mod, "replay", counted)
    # ("I live in Berlin" is lost there too, but its evidence is found apart from its words
    # after the turn's replay was made: it is replayed with that evidence, as it should be)
    facts = ["allergic to peanuts", "prefer window seats", "vegetarian"]
    out = diagnose(t, settings, [Failure(f, 8) for f in facts])
    lost = [d for d in out if d.details.short_term and d.details.short_term.what_if]
    assert len(lost) == 2  # two what-ifs to share (the third fact was never stated)
    fits = st_mod.fits_everything(prepare(t, settings))
    batched = sorted((c[0], c[1]) for c in calls if set(c[2]) == set(facts))
    assert batched == [
        ("scratchpad", 300),
        ("sliding_window", 300),
        ("sliding_window", fits),
        ("summary", 300),
    ]
    # no fact is replayed twice under the same strategy and budget
    tracked = [(strategy, budget, f) for strategy, budget, facts in calls for f in facts]
    assert len(tracked) == len(set(tracked))


def _judged(d):  # type: ignore[no-untyped-def]
    """A diagnosis as JSON, but for the note that counts the sentences the whole run's
    evidence search compared (more, for a run whose facts reach later turns)."""
    out = d.to_dict()
    out["details"].pop("semantic_search", None)
    return out


def test_a_fact_whose_evidence_grows_is_replayed_with_it(model_dir):
    """A paraphrase's evidence is found by meaning when its failure comes up, after the turn's
    replay of its session was made: that replay tracked the evidence its words found (none),
    so the paraphrase replays the session with what was found (lost at turn 6, not never
    kept)."""
    t = load(DEMO)
    settings = Settings(budget=400)
    failures = [
        Failure("allergic to peanuts", 8),
        Failure("likes sitting by the window on planes", 8),
    ]
    together = [_judged(d) for d in diagnose(t, settings, failures)]
    assert together == [_judged(diagnose(t, settings, [f])[0]) for f in failures]
    assert together[1]["details"]["lost_at_turn"] == 6
