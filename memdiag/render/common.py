"""Helpers the renderers share: plain text of nested values (report files are written with
:func:`memdiag.fileio.atomic_write`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memdiag.survival import FactSurvival


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
