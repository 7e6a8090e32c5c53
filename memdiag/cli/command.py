"""memdiag's command classes: typer's, with options coerced without pydantic
(:mod:`memdiag.cli.coercion`) and ``--help`` drawn without ``typer.rich_utils``
(:mod:`memdiag.cli.help`); both keep a small run's start-up light (issue 14)."""

from __future__ import annotations

from typing import Any

import typer.core

from memdiag.cli.coercion import fast_runtime_param


def _give_fast(params: list[Any]) -> None:
    for param in params:
        if getattr(param, "_runtime_param", False) is None:
            fast = fast_runtime_param(getattr(param, "type_descriptor", None))
            if fast is not None:
                param._runtime_param = fast


class _Memdiag:
    """What memdiag changes in typer's command and group classes (mixed in before them)."""

    rich_markup_mode: Any

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)  # type: ignore[misc]
        _give_fast(params)  # the help option too, which click makes on demand
        return params

    def format_help(self, ctx: Any, formatter: Any) -> None:
        # typer draws Rich help unless TYPER_USE_RICH=0 or the markup mode is None
        if not getattr(typer.core, "HAS_RICH", True) or self.rich_markup_mode is None:
            super().format_help(ctx, formatter)  # type: ignore[misc]
            return
        from memdiag.cli.help import print_help

        print_help(self, ctx)


class MemdiagCommand(_Memdiag, typer.core.TyperCommand):
    """A memdiag command."""


class MemdiagGroup(_Memdiag, typer.core.TyperGroup):
    """memdiag's command group."""
