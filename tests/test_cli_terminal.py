"""Small things people hit in a terminal: stdin, completion, -q, -V, flags in --help, progress
across strategies, `| head`, and token bars without colour."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from memdiag.cli import app, strategies_progress
from memdiag.config import Settings
from memdiag.render.console import SECTION_GLYPH, render_replay, usage_bar
from memdiag.replay import run
from memdiag.transcript import load
from tests.conftest import FIXTURES, ROOT

DEMO = FIXTURES / "demo.jsonl"


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), input=input, env=env)


def test_dash_reads_the_transcript_from_stdin():
    from_file = invoke("replay", str(DEMO), "--budget", "400", "--format", "json")
    from_stdin = invoke(
        "replay", "-", "--budget", "400", "--format", "json",
        input=DEMO.read_text(encoding="utf-8"),
    )  # fmt: skip
    assert from_stdin.exit_code == 0, from_stdin.output
    a, b = json.loads(from_file.stdout), json.loads(from_stdin.stdout)
    assert b["transcript"] == "<stdin>"
    assert a["strategies"] == b["strategies"]
    bad = invoke("diagnose", "-", input='{"role": "user"\n')
    assert bad.exit_code == 2
    assert "<stdin>:1: invalid JSON" in bad.stderr


def test_version_short_flag_and_completion():
    r = invoke("-V")
    assert r.exit_code == 0 and r.stdout.strip().startswith("memdiag ")
    assert invoke("--version").stdout == r.stdout
    # in a process of its own, as a user's shell runs it: in-process, typer's completion
    # callback exited 1 now and then late in a full suite run (state left by earlier tests)
    script = subprocess.run(
        [sys.executable, "-m", "memdiag", "--show-completion", "bash"],
        capture_output=True,
        text=True,
        # the shell named, not detected: detection reads the process tree, and a suite run
        # whose parent shell has exited (a background job) has no shell to find
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1",
        },
        timeout=60,
    )
    assert script.returncode == 0, script.stderr
    assert "complete" in script.stdout and "_COMPLETE" in script.stdout
    assert "--install-completion" in invoke("--help").stdout


def test_on_off_flags_show_no_type_in_help():
    for command in ((), ("replay",), ("diagnose",), ("check",), ("convert",)):
        out = invoke(*command, "--help", env={"COLUMNS": "140"}).stdout
        assert "<bool>" not in out, command
    out = invoke("diagnose", "--help", env={"COLUMNS": "140"}).stdout
    assert "--probes" in out and "INTEGER" in out  # options that take a value keep their type


def test_quiet_silences_narration_but_not_errors(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(DEMO.read_text(encoding="utf-8") + "\n{not json\n", encoding="utf-8")
    loud = invoke("replay", str(p), "--skip-invalid", "--html", str(tmp_path / "a.html"))
    assert loud.exit_code == 0 and "skipped 1" in loud.stderr and "wrote HTML" in loud.stderr
    for args in (
        ("replay", str(p), "--skip-invalid", "-q", "--html", str(tmp_path / "b.html")),
        ("-q", "replay", str(p), "--skip-invalid", "--html", str(tmp_path / "c.html")),
    ):
        quiet = invoke(*args)
        assert quiet.exit_code == 0 and quiet.stderr == ""
        assert quiet.stdout == loud.stdout  # the payload is the same
    assert (tmp_path / "b.html").is_file() and (tmp_path / "c.html").is_file()
    err = invoke("replay", str(tmp_path / "missing.jsonl"), "-q")
    assert err.exit_code == 2 and "no such file" in err.stderr


def test_progress_counts_every_strategy_to_the_total():
    t = load(FIXTURES / "allergy.jsonl")
    settings = Settings().with_overrides(strategy="all", budget=300)
    seen: list[tuple[int, int]] = []
    per = len(t.turns)
    total = per * 3
    run(t, settings, progress=strategies_progress(lambda d, n: seen.append((d, n)), per, total))
    done = [d for d, _ in seen]
    assert done == sorted(done) and len(set(done)) == len(done)
    assert done[-1] == total and {n for _, n in seen} == {total}


def _piped(*args: str) -> int:
    """Run memdiag, read one line of its stdout, then close the pipe: its exit code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memdiag", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert b"Traceback" not in err and b"Exception ignored" not in err, err
    return proc.returncode


def test_output_piped_into_head_exits_with_the_commands_own_code(tmp_path):
    big = ("replay", str(FIXTURES / "allergy.jsonl"), "--strategy", "all", "--show", "all")
    assert _piped(*big) == 0
    assert _piped("check", str(FIXTURES / "checks.yaml")) == 0
    spec = tmp_path / "fail.yaml"
    spec.write_text(
        "version: 1\ncases:\n"
        + "".join(
            f"  - name: case {k}\n    transcript: {DEMO}\n"
            "    strategy: {name: sliding_window, budget: 400}\n"
            "    expect: [{kept: allergic to peanuts, at_turn: 8}]\n"
            for k in range(30)
        ),
        encoding="utf-8",
    )
    assert _piped("check", str(spec)) == 1  # a failed check stays a failed check


def test_token_bars_without_colour_tell_the_sections_apart():
    tokens = {"system": 20, "scratchpad": 20, "summary": 20, "memories": 20, "messages": 20}
    bar = usage_bar(tokens, 100, width=25, plain=True).plain
    for glyph in SECTION_GLYPH.values():
        assert glyph * 5 in bar
    assert len(set(SECTION_GLYPH.values())) == len(SECTION_GLYPH)
    t = load(DEMO)
    report = run(t, Settings().with_overrides(strategy="all", budget=400))
    out = io.StringIO()
    render_replay(Console(file=out, force_terminal=True, no_color=True, width=120), report)
    text = out.getvalue()
    codes = {int(c) for sgr in re.findall(r"\x1b\[([0-9;]*)m", text) for c in sgr.split(";") if c}
    assert not codes & {*range(30, 39), *range(90, 98)}  # no colour, only bold/dim/italic
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", text)
    assert "# system" in text and "= messages" in text and "~ summary" in text
    assert re.search(r"#+P+=+·*", text)  # a scratchpad window: system, pinned, messages
    assert re.search(r"#+~+=+·*", text)  # a summary window: system, summary, messages


def test_readme_names_the_apt_line_ci_uses():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "apt-get install -y" in ci and "chromium-headless-shell" in ci
    assert Path(ROOT / "docs" / "report-replay.png").stat().st_size > 10_000
