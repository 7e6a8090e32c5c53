"""Checks of console layout at a given width: a label/value grid whose labels never touch their
values and whose wrapped lines hang under the value column, and tokens (words, ids, UUIDs)
never broken across lines."""

from __future__ import annotations

from collections.abc import Iterable

_EDGE = "“”\"'()[]{},.;:!?…"
BOX = set("│┃╭╮╰╯─━┏┓┗┛┡┩╇┳┻╋┼├┤┬┴┌┐└┘")


def panel_bodies(out: str) -> list[list[str]]:
    """The text lines inside each Rich panel (between its │ borders), panel by panel."""
    panels: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith("╭"):
            panels.append([])
        elif line.startswith("│") and line.rstrip().endswith("│") and panels:
            panels[-1].append(line.rstrip()[2:-2].rstrip())
    return panels


def grid_problems(rows: list[str], labels: Iterable[str]) -> list[str]:
    """Rows of a label/value grid that break it: a value glued to its label, a label unknown,
    a wrapped line that does not start at the value column."""
    known = sorted(set(labels), key=len, reverse=True)
    problems = []
    col = None
    for row in rows:
        label = next((x for x in known if x and row.startswith(x + " ")), None)
        if label is not None:
            start = len(row) - len(row[len(label) :].lstrip())
            if start - len(label) < 2:
                problems.append(f"label glued to its value: {row!r}")
            col = start if col is None else col
            if start != col:
                problems.append(f"value not at column {col}: {row!r}")
        else:
            indent = len(row) - len(row.lstrip())
            if col is None or indent != col:
                problems.append(f"not under the value column ({col}): {row!r}")
    return problems


def _bare(token: str) -> str:
    return token.strip(_EDGE)


def broken_tokens(out: str, sources: Iterable[str], width: int) -> list[str]:
    """Tokens of ``out`` that are not whole tokens of ``sources``: a word or id cut at a line
    end. Tokens longer than ``width`` may be folded and are not counted."""
    whole = {_bare(t) for s in sources for t in s.split()}
    long = {t for t in whole if len(t) >= width - 4}
    bad = []
    for line in out.splitlines():
        for tok in line.split():
            t = _bare(tok)
            if not t or set(t) <= BOX or t in whole:
                continue
            if any(t in lt for lt in long):
                continue
            bad.append(t)
    return bad
