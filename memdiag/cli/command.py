"""memdiag's command classes: typer's, with options coerced without pydantic
(:mod:`memdiag.cli.coercion`) and ``--help`` drawn without ``typer.rich_utils``
(:mod:`memdiag.cli.help`); both keep a small run's start-up light."""

from __future__ import annotations

from typing import Any, NoReturn

import typer
import typer.core

from memdiag.cli.coercion import fast_runtime_param

# typer carries its own copy of click (typer._click): its exceptions are the ones raised
click = typer.core._click


def _give_fast(params: list[Any]) -> None:
    for param in params:
        if getattr(param, "_runtime_param", False) is None:
            fast = fast_runtime_param(getattr(param, "type_descriptor", None))
            if fast is not None:
                param._runtime_param = fast


def _usage_error(exc: Any, args: list[str], command: str) -> NoReturn:
    """One line on stderr and exit 2, as every other bad input (memdiag.cli.usage)."""
    import sys

    from memdiag.cli.usage import one_line
    from memdiag.render.literal import strip_controls

    sys.stderr.write(f"memdiag: {strip_controls(one_line(exc, args, command))}\n")
    raise typer.Exit(2) from None


class _Memdiag:
    """What memdiag changes in typer's command and group classes (mixed in before them)."""

    rich_markup_mode: Any

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)  # type: ignore[misc]
        _give_fast(params)  # the help option too, which click makes on demand
        return params

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        given = list(args)  # the parser consumes ``args``
        try:
            return super().make_context(info_name, args, parent=parent, **extra)  # type: ignore[misc]
        except click.exceptions.UsageError as exc:
            path = " ".join(x for x in (parent.command_path if parent else "", info_name) if x)
            _usage_error(exc, given, path)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)  # type: ignore[misc]
        except click.exceptions.UsageError as exc:
            _usage_error(exc, args, ctx.command_path)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        from memdiag.cli.usage import usage_words

        return [usage_words(p) for p in super().collect_usage_pieces(ctx)]  # type: ignore[misc]

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
