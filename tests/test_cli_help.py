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
