"""memdiag's ``--help``, drawn with a few Rich parts.

Typer draws Rich help through ``typer.rich_utils``, which imports Rich's Markdown (markdown-it)
and traceback (pygments) modules first: 2.3x the import of typer and rich before a line is
printed. memdiag's help texts are plain text, so this module draws the same panels (usage, help,
Arguments, Options, Commands, examples) with Console, Panel, Table and Text alone: help texts are
never read as markup or Markdown. ``tests/test_cli_help.py`` checks that every word of click's
plain help is here too.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from rich.console import Console, Group, RenderableType
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme


class _Options(RegexHighlighter):
    highlights: ClassVar[list[str]] = [
        r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        r"(?P<usage>Usage: )",
    ]


_THEME = Theme(
    {"option": "bold cyan", "switch": "bold green", "types": "bold yellow", "usage": "yellow"}
)
_HIGHLIGHT = _Options()


def print_help(command: Any, ctx: Any) -> None:
    """Print ``command``'s help (a typer command or group) the way typer's Rich help looks."""
    console = Console(theme=_THEME, highlighter=_HIGHLIGHT)
    console.print(Padding(_HIGHLIGHT(Text(command.get_usage(ctx))), 1), style="bold")
    if command.help:
        first, *rest = inspect.cleandoc(command.help).partition("\f")[0].split("\n\n")
        parts: list[RenderableType] = [Text(first.replace("\n", " ").strip())]
        if rest:
            parts += [Text(""), Text("\n\n".join(rest), style="dim")]
        console.print(Padding(Group(*parts), (0, 1, 1, 1)))
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name == "option"]
    for title, group in (("Arguments", arguments), ("Options", options)):
        if group:
            console.print(_panel(title, _params_table(group, ctx)))
    commands = [
        c
        for name in getattr(command, "list_commands", lambda _: [])(ctx)
        if (c := command.get_command(ctx, name)) is not None and not c.hidden
    ]
    if commands:
        table = _table()
        table.add_column(style="bold cyan", overflow="fold")
        table.add_column(ratio=10)
        for c in commands:
            text = inspect.cleandoc(c.short_help or c.help or "").split("\n\n")[0]
            table.add_row(c.name, Text(text.replace("\n", " "), overflow="fold"))
        console.print(_panel("Commands", table))
    if command.epilog:
        _epilog(console, command.epilog)


def _epilog(console: Console, epilog: str) -> None:
    """Examples and other text after the options. Paragraphs (blank lines between them in the
    source) that start with a space are commands or YAML, and a ``\\b`` paragraph (click's
    "do not rewrap") a block of such lines: printed as written, never wrapped, so that they
    paste; the others are prose, wrapped."""
    console.print()
    first = True
    for para in epilog.split("\n\n"):
        if not para.strip():
            continue
        if para.startswith("\b") or para.startswith(" "):
            for line in para.removeprefix("\b").strip("\n").splitlines():
                console.print(Text(" " + line.rstrip()), soft_wrap=True)
        else:
            if not first:
                console.print()
            console.print(Padding(Text(" ".join(para.split())), (0, 1)))
        first = False
    console.print()


def _table() -> Table:
    return Table(
        show_header=False, expand=True, box=None, pad_edge=False, padding=(0, 1), highlight=False
    )


def _panel(title: str, table: Table) -> Panel:
    return Panel(table, border_style="dim", title=title, title_align="left")


def _params_table(params: list[Any], ctx: Any) -> Table:
    table = _table()
    marks = any(p.required for p in params)
    for p in params:
        argument = p.param_type_name == "argument"
        long = [o for o in p.opts if o.startswith("--")]
        short = [o for o in p.opts if not o.startswith("--")]
        names = [_argument_name(p)] if argument else long
        shown = p.display_type_rich(ctx=ctx) if hasattr(p, "display_type_rich") else None
        row: list[RenderableType] = [
            _HIGHLIGHT(Text(",".join(names), overflow="fold")),
            _HIGHLIGHT(Text("" if argument else ",".join(short), overflow="fold")),
            Text(shown or "", style="bold yellow", overflow="fold"),
            _param_help(p, ctx),
        ]
        if marks:
            row.insert(0, Text("*" if p.required else "", style="red"))
        table.add_row(*row)
    return table


def _argument_name(p: Any) -> str:
    name = str(getattr(p, "display_name_raw", None) or p.name)
    return name + "..." if p.metavar is None and p.nargs != 1 else name


def _param_help(p: Any, ctx: Any) -> Text:
    text = Text(" ".join(inspect.cleandoc(p.help or "").split()), overflow="fold")
    extra: list[tuple[str, str]] = []
    default = _default(p, ctx)
    if default:
        extra.append((f"[default: {default}]", "dim"))
    if p.required:
        extra.append(("[required]", "dim red"))
    for words, style in extra:
        if text:
            text.append("\n")
        text.append(words, style=style)
    return text


def _default(p: Any, ctx: Any) -> str:
    """The default as typer shows it (only where the option asks to show one)."""
    extract = getattr(p, "_extract_default_help_str", None)
    if extract is None:
        return ""
    value = extract(ctx=ctx)
    as_text = isinstance(p.show_default, str)
    if not as_text and (value is None or not (p.show_default or ctx.show_default)):
        return ""
    return str(p._get_default_string(ctx=ctx, show_default_is_str=as_text, default_value=value))
