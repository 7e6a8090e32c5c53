"""The command-line contract: exit codes, JSON on stdout only, one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from typer.testing import CliRunner

from memdiag.cli import app
from tests.conftest import FIXTURES

runner = CliRunner()
DEMO = str(FIXTURES / "demo.jsonl")


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_replay_json_contract():
    r = invoke(
        "replay", DEMO, "--budget", "400", "--fact", "allergic to peanuts", "--format", "json"
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) >= {"transcript", "encoding", "budget", "strategies"}
    sw = out["strategies"]["sliding_window"]
    assert set(sw["turns"][0]) >= {"turn", "session", "tokens", "entered", "evicted", "summarized"}
    assert set(sw["turns"][0]["tokens"]) == {
        "system",
        "scratchpad",
        "summary",
        "memories",
        "messages",
        "total",
    }
    fact = sw["facts"][0]
    assert (fact["evidence_id"], fact["lost_at_turn"], fact["mechanism"]) == ("u1", 6, "evicted")


def test_replay_table_shows_eviction_and_survival():
    r = invoke("replay", DEMO, "--budget", "400", "--fact", "allergic to peanuts")
    assert r.exit_code == 0
    assert "evicted u1" in r.stdout
    assert "evicted at turn 6" in r.stdout


def test_replay_jsonl_stream():
    r = invoke("replay", DEMO, "--budget", "400", "--fact", "x y z", "--format", "jsonl")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len([x for x in lines if x.get("type") != "fact"]) == 10
    assert lines[-1]["type"] == "fact" and lines[-1]["stated_at_turn"] is None


def test_malformed_line_exit_2_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": "user" "content": "x"}\n')
    r = invoke("replay", str(bad))
    assert r.exit_code == 2
    assert f"{bad}:2: invalid JSON" in r.stderr
    assert "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1


def test_skip_invalid_reports_count(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"role": "user", "content": "hi"}\nnot json\n{"role": "user", "content": "x"}\n'
    )
    r = invoke("replay", str(bad), "--skip-invalid", "--format", "json")
    assert r.exit_code == 0
    assert "skipped 1 invalid line" in r.stderr
    json.loads(r.stdout)  # stdout stays pure JSON


def test_usage_errors_exit_2():
    assert invoke("replay", DEMO, "--strategy", "lru").exit_code == 2
    assert invoke("replay", DEMO, "--budget", "0").exit_code == 2
    assert invoke("replay", DEMO, "--encoding", "nope").exit_code == 2
    assert invoke("replay", "/nonexistent.jsonl").exit_code == 2


def test_config_file_errors_exit_2(tmp_path):
    cfg = tmp_path / "m.yaml"
    cfg.write_text("budgett: 3\n")
    r = invoke("replay", DEMO, "--config", str(cfg))
    assert r.exit_code == 2 and "unknown key 'budgett'" in r.stderr


def test_help_does_not_import_chromadb():
    code = (
        "import sys; from memdiag.cli import app; sys.argv=['memdiag','--help']\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "assert 'chromadb' not in sys.modules and 'numpy' not in sys.modules, 'heavy import'"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "replay" in out.stdout


def test_version():
    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout.startswith("memdiag ")


def test_diagnose_json_contract_and_fail_on():
    r = invoke("diagnose", DEMO, "--budget", "400", "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    d = out["diagnoses"][0]
    assert set(d) >= {
        "fact",
        "at_turn",
        "verdict",
        "layer",
        "flags",
        "evidence",
        "details",
        "fixes",
    }
    assert set(d["evidence"][0]) >= {"id", "turn", "session", "text", "score", "method"}
    assert [x["verdict"] for x in out["diagnoses"]] == [
        "short_term_dropped",
        "long_term_not_written",
    ]
    assert invoke("diagnose", DEMO, "--budget", "400", "--fail-on", "short_term").exit_code == 1
    assert invoke("diagnose", DEMO, "--budget", "5000", "--fail-on", "none").exit_code == 1
    r = invoke(
        "diagnose",
        DEMO,
        "--budget",
        "5000",
        "--fact",
        "allergic to peanuts",
        "--at",
        "8",
        "--fail-on",
        "short_term,long_term",
    )
    assert r.exit_code == 0
    assert invoke("diagnose", DEMO, "--fail-on", "middle").exit_code == 2


def test_diagnose_table_names_verdict_and_fix():
    r = invoke("diagnose", DEMO, "--budget", "400")
    assert r.exit_code == 0
    assert "short_term_dropped" in r.stdout and "long_term_not_written" in r.stdout
    assert "Raise the sliding-window budget to at least" in r.stdout


def test_strategy_flags_override_config(tmp_path):
    cfg = tmp_path / "m.yaml"
    cfg.write_text("summary:\n  summary_max_tokens: 300\n")
    allergy = str(FIXTURES / "allergy.jsonl")
    args = ["replay", allergy, "--strategy", "summary", "--budget", "800", "-f", "json"]
    r = invoke(*args, "--config", str(cfg), "--summary-max-tokens", "60")
    turns = json.loads(r.stdout)["strategies"]["summary"]["turns"]
    assert 0 < max(t["tokens"]["summary"] for t in turns) <= 60
    r = invoke(*args, "--config", str(cfg))
    turns = json.loads(r.stdout)["strategies"]["summary"]["turns"]
    assert max(t["tokens"]["summary"] for t in turns) > 60


def test_convert_writes_canonical_atomically(tmp_path):
    out = tmp_path / "conv.jsonl"
    src = FIXTURES / "formats" / "locomo_sample.json"
    r = invoke("convert", str(src), "-o", str(out))
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "session"
    assert any(x.get("id", "").startswith("D1:") for x in lines)
    assert not (tmp_path / "conv.jsonl.tmp").exists()
    # and the result replays like the original
    a = json.loads(invoke("replay", str(src), "--budget", "300", "-f", "json").stdout)
    b = json.loads(invoke("replay", str(out), "--budget", "300", "-f", "json").stdout)
    assert a["strategies"] == b["strategies"]


def test_transcript_text_is_never_interpreted_as_markup(tmp_path):
    """Rich markup in user content, ids and paths is printed as typed (no injection)."""
    d = tmp_path / "[red]dir"
    d.mkdir()
    p = d / "t.jsonl"
    lines = [
        {
            "id": "[bold]u1[/bold]",
            "role": "user",
            "content": "I'm allergic to [link=http://x]peanuts[/link].",
        },
        {
            "role": "assistant",
            "content": "ok",
            "forgot": "allergic to [link=http://x]peanuts[/link]",
        },
        {"role": "user", "content": "[blink]snack?[/blink]"},
        {
            "role": "assistant",
            "content": "peanuts!",
            "forgot": "allergic to [link=http://x]peanuts[/link]",
        },
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines))
    for args in (
        ["replay", str(p), "--fact", "allergic to [link=http://x]peanuts[/link]", "--show", "all"],
        ["diagnose", str(p)],
    ):
        r = invoke(*args)
        assert r.exit_code == 0, r.output
        assert "[link=http://x]peanuts[/link]" in r.stdout
        assert "[bold]u1[/bold]" in r.stdout
        assert "[red]dir" in r.stdout


def test_internal_error_exit_3_with_traceback_file(monkeypatch):
    import memdiag.replay

    def boom(*args, **kwargs):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(memdiag.replay, "run", boom)
    r = invoke("replay", DEMO)
    assert r.exit_code == 3
    line = r.stderr.strip()
    assert "internal error: RuntimeError: simulated bug" in line and "Traceback" not in line
    path = line.split("traceback: ", 1)[1].split(";", 1)[0]
    with open(path) as fp:
        assert "simulated bug" in fp.read()
    r = invoke("--debug", "replay", DEMO)
    assert r.exit_code == 3 and "Traceback" in r.stderr


def test_every_output_format_has_a_renderer_for_every_command(tmp_path):
    """Each command renders each OutputFormat (table, json, jsonl): none falls through."""
    from memdiag.render import OutputFormat

    spec = tmp_path / "checks.yaml"
    spec.write_text(
        f"version: 1\ncases:\n  - name: demo\n    transcript: {DEMO}\n"
        "    strategy: {name: sliding_window, budget: 400}\n"
        "    expect:\n      - lost: allergic to peanuts\n        at_turn: 8\n"
    )
    commands = {
        "replay": ["replay", DEMO, "--budget", "400"],
        "diagnose": ["diagnose", DEMO, "--budget", "400"],
        "inspect-store": ["inspect-store", "--facts-file", str(FIXTURES / "facts_records.json")],
        "check": ["check", str(spec)],
    }
    for name, args in commands.items():
        for fmt in OutputFormat:
            r = invoke(*args, "--format", fmt.value)
            assert r.exit_code == 0, (name, fmt, r.output)
            assert r.stdout.strip(), (name, fmt)
            if fmt is OutputFormat.json:
                json.loads(r.stdout)
            elif fmt is OutputFormat.jsonl:
                [json.loads(line) for line in r.stdout.splitlines()]


def test_html_reports_escape_transcript_content(tmp_path):
    p = tmp_path / "t.jsonl"
    evil = "<script>alert('x')</script><img src=x onerror=alert(1)>"
    lines = [
        {"id": "u1", "role": "user", "content": f"I'm allergic to peanuts. {evil}"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "snack?"},
        {"role": "assistant", "content": "peanuts!", "forgot": f"allergic to peanuts {evil}"},
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines))
    for command in ("replay", "diagnose"):
        out = tmp_path / f"{command}.html"
        r = invoke(command, str(p), "--fact", f"allergic to peanuts {evil}", "--html", str(out))
        assert r.exit_code == 0, r.output
        page = out.read_text(encoding="utf-8")
        assert page.startswith("<!doctype html>") and "allergic to peanuts" in page
        # the report's data and its own script; the transcript's tags only as escaped JSON text
        assert page.count("<script") == 2 and "<img" not in page
        assert "\\u003cscript\\u003ealert('x')" in page


def test_long_replay_lists_first_and_last_changes_only(tmp_path):
    p = tmp_path / "long.jsonl"
    lines = []
    for k in range(120):
        lines.append({"role": "user", "content": f"Question {k} about the Lisbon trip, day {k}."})
        lines.append({"role": "assistant", "content": f"Answer {k}: take tram 28 early."})
    p.write_text("\n".join(json.dumps(x) for x in lines))
    r = invoke("replay", str(p), "--budget", "120")
    assert r.exit_code == 0
    assert "more turns with changes" in r.stdout
    listed = [line for line in r.stdout.splitlines() if re.match(r"\s+\d+ s1·", line)]
    assert len(listed) == 40
    # the first and the last twenty of the turns where something left the window
    from memdiag.config import Settings
    from memdiag.replay import run
    from memdiag.transcript import load

    records = run(load(p), Settings(budget=120)).results[0].turns
    changed = [records.turn(k).number for k in range(len(records)) if records.changed(k)]
    assert len(changed) > 40
    assert [int(line.split()[0]) for line in listed] == changed[:20] + changed[-20:]
    r = invoke("replay", str(p), "--budget", "120", "--show", "all")
    assert "more turns with changes" not in r.stdout


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    import pytest

    from memdiag.fileio import atomic_write as atomic_open

    out = tmp_path / "sub" / "report.xml"
    with atomic_open(out) as fp:
        fp.write("first")
    with pytest.raises(RuntimeError), atomic_open(out) as fp:
        fp.write("half")
        raise RuntimeError("boom")
    assert out.read_text() == "first"
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["report.xml"]


def test_option_groups_expand_into_each_command_that_shares_them():
    import dataclasses

    import typer.main

    from memdiag.cli.options import StoreFlags, WindowFlags

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for command, group in (
        ("replay", WindowFlags),
        ("diagnose", WindowFlags),
        ("diagnose", StoreFlags),
        ("inspect-store", StoreFlags),
    ):
        params = [p.name for p in commands[command].params]
        fields = [f.name for f in dataclasses.fields(group)]
        assert fields == [p for p in params if p in fields], (command, group)  # in order
    assert "window" not in [p.name for p in commands["replay"].params]
    # and the group reaches the command: --max-turns caps the window like a config file does
    r = invoke("replay", DEMO, "--max-turns", "1", "--fact", "allergic to peanuts", "-f", "json")
    fact = json.loads(r.stdout)["strategies"]["sliding_window"]["facts"][0]
    assert fact["lost_at_turn"] == 2
