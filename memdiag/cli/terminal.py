"""Terminal details of the CLI: flags in --help, one progress count over several strategies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def flags_without_a_type() -> None:
    """Typer's help prints `<bool>` after on/off flags, as if they took a value: they take none,
    so show nothing there; options that take a value show it in click's words (TEXT, INTEGER,
    PATH, [table|json|jsonl]) rather than typer's `<str>`, `<list[str]>` (memdiag.cli.usage)."""
    from typer.core import TyperArgument, TyperOption

    from memdiag.cli.usage import metavar

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "memdiag_flags", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag and not self.count else metavar(shown(self, ctx))

    display_type_rich.memdiag_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    argument = getattr(TyperArgument, "display_type_rich", None)
    if argument is not None:

        def argument_type(self: TyperArgument, ctx: Any) -> str | None:
            return metavar(argument(self, ctx))

        TyperArgument.display_type_rich = argument_type  # type: ignore[method-assign,assignment]


def strategies_progress(
    tick: Callable[[int, int], None], per_strategy: int, total: int
) -> Callable[[int], None]:
    """Turn numbers of strategies replayed one after another, as one count to ``total``:
    each strategy counts its turns again from 1, so a count that does not grow starts the next
    strategy."""
    state = {"base": 0, "last": 0}

    def advance(turn: int) -> None:
        if turn <= state["last"]:
            state["base"] += per_strategy
        state["last"] = turn
        tick(state["base"] + turn, total)

    return advance
