"""`check` reads, counts and indexes a transcript once however many cases name it
(checks/run.py ``_read``, run_context ``transcripts_shared``), with the results of each case run
alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from memdiag import replay as replay_mod
from memdiag import run_context, tokens
from memdiag.checks import load_spec
from memdiag.checks import run as run_mod
from memdiag.config import Settings
from memdiag.diagnosis import Failure, diagnose
from memdiag.render.jsonout import replay_json
from memdiag.transcript import load
from tests.conftest import FIXTURES


def _spec(tmp_path: Path, chat: Path) -> Path:
    cases = [
        {
            "name": f"{strategy} {budget}",
            "transcript": chat.name,
            "strategy": {"name": strategy, "budget": budget},
            "expect": [
                {"kept": "allergic to peanuts"},
                {"lost": "prefer window seats", "at_turn": 3},
            ],
        }
        for strategy in ("sliding_window", "summary", "scratchpad")
        for budget in (200, 400)
    ]
    spec = tmp_path / "checks.yaml"
    spec.write_text(yaml.safe_dump({"version": 1, "cases": cases}), encoding="utf-8")
    return spec


def _key(results):  # type: ignore[no-untyped-def]
    return [(c.name, c.passed, c.failures, c.failure_lines) for c in results]


def test_cases_over_one_file_read_it_once_with_the_results_of_each_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = tmp_path / "demo.jsonl"
    shutil.copy(FIXTURES / "demo.jsonl", chat)
    spec = load_spec(_spec(tmp_path, chat))
    alone = [run_mod.run_case(c, spec.path) for c in spec.cases]  # nothing shared

    reads: list[str] = []
    counted: list[int] = []
    real_load, real_costs = load, tokens.TokenCounter.message_costs
    monkeypatch.setattr(
        "memdiag.transcript.load", lambda p, **k: reads.append(str(p)) or real_load(p, **k)
    )
    monkeypatch.setattr(
        tokens.TokenCounter,
        "message_costs",
        lambda self, m: counted.append(len(m)) or real_costs(self, m),
    )
    report = run_mod.run_checks(spec, jobs=1)
    assert _key(report.cases) == _key(alone)
    assert len(spec.cases) == 6 and not all(c.passed for c in report.cases)  # it could fail
    assert reads == [str(chat)]  # one read for the six cases
    assert len(counted) == 1  # and one count
    assert run_mod._READ is None and run_context._SHARED is None  # nothing kept after the run


def test_a_file_that_changed_is_read_again(tmp_path: Path) -> None:
    chat = tmp_path / "demo.jsonl"
    shutil.copy(FIXTURES / "demo.jsonl", chat)
    (case,) = load_spec(_spec(tmp_path, chat)).cases[:1]
    with run_mod.reads_shared():
        first = run_mod._read(case)
        assert run_mod._read(case) is first
        lines = chat.read_text(encoding="utf-8").splitlines()
        chat.write_text("\n".join(lines[:-2]) + "\n", encoding="utf-8")  # two messages fewer
        again = run_mod._read(case)
    assert again is not first and len(again.messages) < len(first.messages)
    assert again == load(chat)


@pytest.mark.parametrize("name", ["sliding_window", "summary", "scratchpad"])
def test_shared_contexts_replay_and_diagnose_as_fresh_ones(name: str) -> None:
    """Contexts made of one transcript while shared (counts, units and indexes made once,
    under other budgets, encodings and keep_system) replay and diagnose as fresh ones; the
    evidence one context remembers stays its own."""
    t = load(FIXTURES / "demo.jsonl")
    facts = ["allergic to peanuts", "prefer window seats", "Mia"]
    runs = [
        Settings(budget=200, strategy=name),
        Settings(budget=400, strategy=name),
        Settings(budget=300, strategy=name, encoding="cl100k_base"),
        Settings(budget=300, strategy=name).with_overrides(keep_system=False),
    ]

    def outcome(s: Settings, rctx: replay_mod.ReplayContext) -> object:
        res = replay_mod.replay(rctx, name, facts)
        failures = [Failure(f, len(t.turns)) for f in facts]
        found = [d.to_dict() for d in diagnose(t, s, failures, None, what_if=True)]
        return replay_json(t.path, rctx.counter.encoding_name, rctx.budget, [res]), found

    fresh = [outcome(s, replay_mod.prepare(t, s)) for s in runs]
    with replay_mod.transcripts_shared():
        contexts = [replay_mod.prepare(t, s) for s in runs]
        assert contexts[0].costs is contexts[1].costs  # counted once
        assert contexts[2].costs is not contexts[0].costs  # another encoding counts again
        contexts[0].remember_evidence("Mia", [0])
        assert contexts[1].evidence_of("Mia") != (0,)  # a context's evidence is its own
        contexts[0] = replay_mod.prepare(t, runs[0])
        shared = [outcome(s, c) for s, c in zip(runs, contexts, strict=True)]
    assert shared == fresh
    assert run_context._SHARED is None


def test_a_bound_keeps_the_most_recently_read(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(run_mod, "READ_MESSAGES", 1)
    chats = []
    for k in range(2):
        chat = tmp_path / f"chat{k}.jsonl"
        shutil.copy(FIXTURES / "demo.jsonl", chat)
        chats.append(chat)
    spec = load_spec(_spec(tmp_path, chats[0]))
    case = spec.cases[0]
    with run_mod.reads_shared():
        run_mod._read(case)
        other = run_mod.dataclasses.replace(case, transcript=str(chats[1]))
        run_mod._read(other)
        assert run_mod._READ is not None and len(run_mod._READ) == 1  # the first one let go
        assert next(iter(run_mod._READ.values())).path == str(chats[1])


def test_workers_share_what_they_read(tmp_path: Path) -> None:
    """A worker keeps sharing after its initializer returns (the context is held, not
    dropped and closed), so the cases of its chunk read their file once."""
    import subprocess
    import sys

    chat = tmp_path / "demo.jsonl"
    shutil.copy(FIXTURES / "demo.jsonl", chat)
    spec = _spec(tmp_path, chat)
    script = (
        "import gc, sys\n"
        "import memdiag.checks.run as r\n"
        "r._share_in_worker(); gc.collect()\n"
        "from memdiag.checks import load_spec\n"
        "spec = load_spec(sys.argv[1])\n"
        "first = r._read(spec.cases[0])\n"
        "print(r._read(spec.cases[1]) is first)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(spec)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True", out.stderr
