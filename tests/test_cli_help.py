"""memdiag's own Rich help (memdiag/cli/help.py) against click's plain help of the same commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from memdiag.transcript.formats import FORMATS

COMMANDS = [[], ["replay"], ["diagnose"], ["inspect-store"], ["convert"], ["check"]]


def _help(args: list[str], **env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "memdiag", *args, "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "220", **env},
        check=True,
    )
    return out.stdout


def _words(text: str) -> set[str]:
    text = re.sub(r"(?<=\w)-\n\s+", "-", text)  # click's wrapper also breaks lines after a hyphen
    return set(re.findall(r"[\w<>\[\]|'-]+", text.replace("...", " "))) - {"-"}


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "memdiag")
def test_rich_help_says_everything_the_plain_help_says(args):
    plain = _help(args, TYPER_USE_RICH="0")
    rich = _help(args)
    assert "╭─ Options" in rich and "Options:" in plain  # each is the kind it should be
    missing = _words(plain) - _words(rich)
    assert not missing, f"in click's plain help only: {sorted(missing)}"


def test_help_lists_every_input_format():
    text = " ".join(_help(["replay"]).split())
    listed = re.search(r"Input format \(default: auto-detect\): ([^.]*)\.", text)
    assert listed is not None
    assert set(re.findall(r"\w+", listed.group(1))) == set(FORMATS)


def test_help_imports_neither_markdown_nor_typers_rich_help():
    code = (
        "import sys\n"
        "from memdiag.cli import app\n"
        "try:\n"
        "    app(['replay', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('typer.rich_utils', 'markdown_it', 'pygments', 'pydantic')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "memdiag")
def test_narrow_terminals_fold_words_instead_of_cutting_them(args):
    text = subprocess.run(
        [sys.executable, "-m", "memdiag", *args, "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "40"},
        check=True,
    ).stdout
    assert "…" not in text


# --- help and usage in words -------------------------------------------------------------------


def _spec_from_help(text: str) -> str:
    """The YAML example of `check --help`: the lines after its heading, up to a blank line."""
    lines = text.splitlines()
    start = next(k for k, ln in enumerate(lines) if "Spec (paths are relative" in ln) + 1
    block = []
    for ln in lines[start:]:
        if not ln.strip():
            if block:
                break
            continue
        block.append(ln.rstrip())
    import textwrap

    return textwrap.dedent("\n".join(block))


@pytest.mark.parametrize("rich", [True, False], ids=["rich", "plain"])
@pytest.mark.parametrize("width", [80, 120])
def test_the_spec_example_in_check_help_is_a_valid_spec(width, rich, tmp_path):
    import shutil

    import yaml

    from memdiag.checks import check
    from memdiag.checks.spec import load_spec
    from memdiag.config import Settings
    from tests.conftest import FIXTURES

    env = {"COLUMNS": str(width)} | ({} if rich else {"TYPER_USE_RICH": "0"})
    text = _help(["check"], **env)
    example = _spec_from_help(text)
    data = yaml.safe_load(example)  # pasted, it parses
    assert data["cases"][0]["expect"][0]["kept"] == "allergic to peanuts"
    spec = tmp_path / "memdiag-checks.yaml"
    spec.write_text(example)
    shutil.copy(FIXTURES / "allergy.jsonl", tmp_path / "chat.jsonl")
    loaded = load_spec(spec)  # memdiag's own loader accepts it
    assert [c.name for c in loaded.cases] == ["allergy stays pinned"]
    assert check(spec, Settings()).ok  # and it holds on the allergy transcript


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "memdiag")
def test_metavars_read_like_click(args):
    for env in ({}, {"TYPER_USE_RICH": "0"}):
        text = _help(args, **env)
        assert not re.search(r"<(?:list\[)?\w+\]?>", text), re.findall(r"<[^>\s]+>", text)
        assert not re.search(r"\{[a-z_]+\}", text.splitlines()[1] + text.splitlines()[0])
    if args in (["replay"], ["diagnose"]):
        text = " ".join(_help(args).split())
        assert "--fact TEXT" in text and "--budget INTEGER" in text
        assert f"memdiag {args[0]} [OPTIONS] TRANSCRIPT" in text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["replay", "fixtures/demo.jsonl", "--budget", "abc"], "--budget: 'abc' is not an integer"),
        (["replay", "fixtures/demo.jsonl", "--budget=1.5"], "--budget: '1.5' is not an integer"),
        (["inspect-store", "--threshold", "high"], "--threshold: 'high' is not a number"),
        (["check", "--jobs", "x", "spec.yaml"], "--jobs: 'x' is not an integer"),
        (["diagnose"], "missing argument TRANSCRIPT"),
        (["diagnose", "x.jsonl", "--nope"], "No such option: --nope"),
        (["diagnoze"], "No such command 'diagnoze'"),
        (["replay", "fixtures/demo.jsonl", "--format", "xml"], "--format: 'xml' is not one of"),
        (["diagnose", "fixtures/demo.jsonl", "--strategy", "all"], "--strategy all: diagnose"),
    ],
)
def test_usage_errors_are_one_line(args, expected):
    from tests.conftest import ROOT

    r = subprocess.run(
        [sys.executable, "-m", "memdiag", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memdiag: "), r.stderr
    assert expected in lines[0]
    assert "╭" not in r.stderr and "Input should be" not in r.stderr


def test_plurals_and_no_doubled_words(tmp_path):
    from tests.conftest import ROOT

    one = tmp_path / "one.jsonl"
    one.write_text('{"role": "user", "content": "hi"}\n')
    r = subprocess.run(
        [sys.executable, "-m", "memdiag", "convert", str(one), "-o", str(tmp_path / "o.jsonl")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0 and "wrote 1 message in 1 session to" in r.stderr, r.stderr
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"a\0b")
    r = subprocess.run(
        [sys.executable, "-m", "memdiag", "replay", str(binary)], capture_output=True, text=True
    )
    assert r.returncode == 2 and "UTF-8 UTF-8" not in r.stderr and "UTF-8" in r.stderr
