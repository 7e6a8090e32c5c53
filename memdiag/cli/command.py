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


def _format_help(command: Any, ctx: Any) -> bool:
    """Draw the help here when typer would draw it with Rich; False: typer's plain help."""
    if not getattr(typer.core, "HAS_RICH", True) or command.rich_markup_mode is None:
        return False
    from memdiag.cli.help import print_help

    print_help(command, ctx)
    return True


class MemdiagCommand(typer.core.TyperCommand):
    """A memdiag command."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _give_fast(params)  # the help option too, which click makes on demand
        return params

    def format_help(self, ctx: Any, formatter: Any) -> None:
        if not _format_help(self, ctx):
            super().format_help(ctx, formatter)


class MemdiagGroup(typer.core.TyperGroup):
    """memdiag's command group."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _give_fast(params)
        return params

    def format_help(self, ctx: Any, formatter: Any) -> None:
        if not _format_help(self, ctx):
            super().format_help(ctx, formatter)
