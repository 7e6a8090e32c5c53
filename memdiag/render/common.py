"""Helpers the renderers share: atomic report files and plain text of nested values."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memdiag.replay import FactSurvival


@contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open ``path`` for writing so that it appears whole or not at all.

    Writes go to ``PATH.tmp``, which replaces ``path`` only when the block succeeds (a CI step
    never reads a half-written report); on failure the temporary file is removed.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    try:
        with tmp.open(mode, encoding=None if "b" in mode else "utf-8") as fp:
            yield fp
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)


def plain(value: object, list_sep: str = ", ") -> str:
    """A details value (nested dicts and lists) as one line of plain text."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={plain(v, list_sep)}" for k, v in value.items())
    if isinstance(value, list):
        return list_sep.join(plain(v, list_sep) for v in value)
    return str(value)


def gaps_text(fact: FactSurvival) -> str:
    """Earlier losses of a fact that is back in the window (restated): '12–40 (evicted)'."""
    return ", ".join(f"{a}–{b} ({mech})" for a, b, mech in fact.gaps())
