"""Framework state through every transcript command, as a user runs them: each format's real
fixture through convert, replay, diagnose and check; and `--system TEXT|@FILE`, the system
prompt that AutoGen, LlamaIndex and ADK state leave out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memdiag.cli import app
from memdiag.transcript import load
from tests.transcript.realdata import FORMATS, runner

# (format, fixture, the --session it needs); each states Mia's allergy but the one checkpoint,
# whose state the graph had trimmed (test_langgraph_checkpoints.py)
CASES = [
    ("pydantic_ai", FORMATS / "pydantic_ai" / "history.json", None),
    ("llamaindex", FORMATS / "llamaindex" / "chat_store.json", "mia-trip"),
    ("autogen", FORMATS / "autogen" / "agent_state.json", None),
    ("adk", FORMATS / "adk" / "session.json", None),
    ("smolagents", FORMATS / "smolagents" / "memory.json", None),
    ("langgraph", FORMATS / "langgraph_sqlite" / "checkpoints.sqlite", "mia-trip"),
    ("langgraph_checkpoint", FORMATS / "langgraph_sqlite" / "checkpoint_dumpd.json", None),
]
IDS = [c[0] for c in CASES]


def _fact(fmt: str) -> str:
    return "window seat" if fmt == "langgraph_checkpoint" else "allergic to peanuts"


def _args(path: Path, session: str | None) -> list[str]:
    return [str(path), *(["--session", session] if session else [])]


@pytest.mark.parametrize(("fmt", "path", "session"), CASES, ids=IDS)
def test_convert_writes_what_load_reads(fmt: str, path: Path, session: str | None) -> None:
    res = runner.invoke(app, ["convert", *_args(path, session)])
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in res.stdout.splitlines()]
    t = load(path, select=session)
    assert t.format == fmt
    assert [r["id"] for r in records if "role" in r] == [m.id for m in t.messages]
    # and the canonical file reads back as the same conversation
    again = runner.invoke(app, ["convert", "-", "--from", "canonical"], input=res.stdout)
    assert again.exit_code == 0 and again.stdout == res.stdout


@pytest.mark.parametrize(("fmt", "path", "session"), CASES, ids=IDS)
def test_replay_and_diagnose(fmt: str, path: Path, session: str | None) -> None:
    res = runner.invoke(app, ["replay", *_args(path, session), "-f", "json"])
    assert res.exit_code == 0, res.output
    turns = json.loads(res.stdout)["strategies"]["sliding_window"]["turns"]
    assert len(turns) == len(load(path, select=session).turns)
    diag = runner.invoke(
        app, ["diagnose", *_args(path, session), "--fact", _fact(fmt), "-f", "json"]
    )
    assert diag.exit_code == 0, diag.output
    (d,) = json.loads(diag.stdout)["diagnoses"]
    assert d["evidence"] and _fact(fmt) in d["evidence"][0]["text"]


@pytest.mark.parametrize(("fmt", "path", "session"), CASES, ids=IDS)
def test_check_reads_it(fmt: str, path: Path, session: str | None, tmp_path: Path) -> None:
    chosen = f"\n    conversation: {session}" if session else ""
    spec = tmp_path / "checks.yaml"
    spec.write_text(
        "version: 1\ncases:\n"
        f"  - name: {fmt} keeps a fact\n    transcript: {path}{chosen}\n"
        f"    expect:\n      - kept: {_fact(fmt)}\n        at_turn: 2\n"
    )
    res = runner.invoke(app, ["check", str(spec), "-f", "json"])
    assert res.exit_code == 0, res.output


LLAMA = FORMATS / "llamaindex" / "chat_store.json"


def _system_tokens(extra: list[str]) -> int:
    res = runner.invoke(app, ["replay", str(LLAMA), "--session", "mia-trip", "-f", "json", *extra])
    assert res.exit_code == 0, res.output
    turns = json.loads(res.stdout)["strategies"]["sliding_window"]["turns"]
    return int(turns[-1]["tokens"]["system"])


def test_system_supplies_the_prompt_the_state_left_out(tmp_path: Path) -> None:
    prompt = "You are a travel assistant. Remember what the user tells you."
    assert _system_tokens([]) == 0
    with_text = _system_tokens(["--system", prompt])
    assert with_text > 0
    file = tmp_path / "prompt.txt"
    file.write_text(prompt, encoding="utf-8")
    assert _system_tokens(["--system", f"@{file}"]) == with_text


def test_the_note_says_the_prompt_is_missing_until_given() -> None:
    res = runner.invoke(app, ["convert", str(LLAMA), "--session", "mia-trip"])
    assert "note: the llamaindex file does not save the agent's system prompt" in res.stderr
    given = runner.invoke(app, ["convert", str(LLAMA), "--session", "mia-trip", "--system", "Hi"])
    assert "system prompt" not in given.stderr
    first = json.loads(given.stdout.splitlines()[1])
    assert first == {"role": "system", "content": "Hi", "id": "system-prompt", "from": "--system"}


def test_a_missing_system_file_is_one_line_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    res = runner.invoke(
        app, ["replay", str(LLAMA), "--session", "mia-trip", "--system", f"@{missing}"]
    )
    assert res.exit_code == 2
    assert str(missing) in res.stderr and res.stderr.count("\n") == 1


def test_check_takes_the_system_prompt_as_text_or_file(tmp_path: Path) -> None:
    """The system prompt takes its room in every window: at a budget of 160 tokens the store's
    five turns (151 tokens) keep the allergy, but not beside a 75-token system prompt."""
    prompt = "You are a careful travel assistant. " * 10
    (tmp_path / "prompt.txt").write_text(prompt, encoding="utf-8")

    def run(system: str) -> int:
        spec = tmp_path / "checks.yaml"
        spec.write_text(
            "version: 1\ncases:\n  - name: prompt\n"
            f"    transcript: {LLAMA}\n    conversation: mia-trip\n{system}"
            "    strategy: {name: sliding_window, budget: 160}\n"
            "    expect:\n      - lost: allergic to peanuts\n        at_turn: 5\n"
        )
        return runner.invoke(app, ["check", str(spec), "-f", "json"]).exit_code

    assert run("") == 1  # without it the allergy fits: `lost` fails
    assert run(f"    system: {prompt.strip()}\n") == 0
    assert run('    system: "@prompt.txt"\n') == 0
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        f"version: 1\ncases:\n  - name: p\n    transcript: {LLAMA}\n    system: '@nope.txt'\n"
        "    expect: [{kept: x}]\n"
    )
    res = runner.invoke(app, ["check", str(spec)])
    assert res.exit_code == 2 and f"{spec}:5:" in res.stderr and "nope.txt" in res.stderr
