"""The registry of input formats: every module of this package but ``base`` is one format.

The registry finds the formats by listing the package, so it is the only list of their names:
``--from``'s help, the detection order, the error that lists the choices, the tests and the fuzz
targets all read it. A format module follows :class:`~memdiag.transcript.formats.base.Format`:
``name`` (its module's name), ``detect``, ``read``, ``detect_priority`` (its place in
auto-detection: lower is asked first) and ``examples`` (fixture files it reads). Adding a format
is adding its module, its fixture script and its test: ``docs/adding-a-format.md``.

Listing the names imports no reader (``memdiag --help`` stays fast); the first detection or
``load`` imports them all.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memdiag.errors import InputError, UsageError

if TYPE_CHECKING:
    from memdiag.transcript.formats.base import Format, PathFormat, Selection
    from memdiag.transcript.model import Transcript
    from memdiag.transcript.source import Source

# modules of this package that are not formats
NOT_FORMATS = frozenset({"base"})


@cache
def names() -> tuple[str, ...]:
    """The name of every format, sorted (the order that help and errors list them in), from the
    package's module names: no reader is imported."""
    found = (m.name for m in pkgutil.iter_modules(__path__))
    return tuple(sorted(n for n in found if n not in NOT_FORMATS and not n.startswith("_")))


def get(name: str) -> Format:
    """The format called ``name`` (its module, imported on first use)."""
    if name not in names():
        raise InputError(f"unknown format {name!r}; choose one of: {', '.join(names())}")
    module = importlib.import_module(f"{__name__}.{name}")
    if getattr(module, "name", None) != name:  # a module must say which format it is
        raise TypeError(f"format module {module.__name__} declares name {module.name!r}")
    return cast("Format", module)


@cache
def formats() -> dict[str, Format]:
    """name → format, for every format, in the order of :func:`names`."""
    return {n: get(n) for n in names()}


@cache
def detection_order() -> tuple[Format, ...]:
    """The order in which auto-detection asks the formats: by ``detect_priority`` (lower
    first), then by name. Each module says why its number is where it is."""
    return tuple(sorted(formats().values(), key=lambda f: (f.detect_priority, f.name)))


@cache
def path_formats() -> tuple[PathFormat, ...]:
    """The formats read from the file itself rather than parsed JSON (an SQLite database):
    those with ``detect_path`` and ``read_path``."""
    return tuple(cast("PathFormat", f) for f in formats().values() if hasattr(f, "detect_path"))


def __getattr__(attr: str) -> Any:
    # the registry as constants, computed on first use (importing this package lists nothing)
    if attr == "FORMATS":
        return formats()
    if attr == "DETECTION_ORDER":
        return detection_order()
    if attr == "PATH_FORMATS":
        return path_formats()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def detect_format(source: Source) -> str:
    """The name of the first format, in detection order, that takes the parsed file."""
    for fmt in detection_order():
        if fmt.detect(source):
            return fmt.name
    raise InputError(
        "unrecognised transcript format; expected canonical JSONL (docs/reference.md#formats) "
        "or one of: " + ", ".join(names()) + " (use --from NAME)",
        path=source.path,
    )


def load(
    path: str | Path,
    fmt: str | None = None,
    *,
    skip_invalid: bool = False,
    select: str | None = None,
    selection: Selection | None = None,
    system: str | None = None,
) -> Transcript:
    """Load a transcript in any supported format (auto-detected unless ``fmt`` is given).

    ``selection`` picks among what a file holds (a conversation of a chat export or a session
    of an Agents SDK database, an agent of a trace): by id or title, or ``all``; without it such
    a file raises ChoiceNeeded, which lists them. ``select`` is short for
    ``selection=Selection(conversation=select)``. A choice that the file's reader does not take
    is a UsageError. ``system`` is the system prompt the agent sends, for a file that does not
    save it (``--system``): it becomes the first message of the transcript.
    """
    from memdiag.collector import collections_paused

    # a load makes several objects per record, all of them kept: the collector's passes over
    # them find no garbage (on 50,000 messages they cost about a third of the load)
    with collections_paused():
        return _load(path, fmt, skip_invalid, select, selection, system)


def _load(
    path: str | Path,
    fmt: str | None,
    skip_invalid: bool,
    select: str | None,
    selection: Selection | None,
    system: str | None,
) -> Transcript:
    from memdiag.transcript.formats.base import CHOICES, Selection
    from memdiag.transcript.model import RawItem, RawMessage, build
    from memdiag.transcript.source import check_tool_calls, read_source

    chosen = selection if selection is not None else Selection(conversation=select)
    if fmt is not None:
        fmt = fmt.replace("-", "_")  # `--from claude-code` names the claude_code format
        get(fmt)  # an unknown name is a usage error that lists the names
    by_path = next(
        (f for f in path_formats() if f.name == fmt or (fmt is None and f.detect_path(path))),
        None,
    )
    items: list[RawItem]
    reader: Any
    # what a reader raises on input is an InputError (through the reader toolkit,
    # memdiag/transcript/toolkit.py); anything else is a bug in memdiag and goes through (exit 3)
    if by_path is not None:
        _check_choices(chosen, by_path.name, by_path.selects, CHOICES)
        source, items = by_path.read_path(path, skip_invalid, chosen)
        name, reader = by_path.name, by_path
    else:
        source = read_source(path, skip_invalid)
        name = fmt or detect_format(source)
        reader = get(name)
        selects = getattr(reader, "selects", {})
        _check_choices(chosen, name, selects, CHOICES)
        if selects:  # holds several conversations or agents: choose
            items = list(reader.read(source, skip_invalid, chosen))
        else:
            items = list(reader.read(source, skip_invalid))
    if not any(isinstance(i, RawMessage) for i in items):
        raise InputError("no messages found", path=source.path)
    for item in items:  # every format: a tool call the counter and writer can read
        if isinstance(item, RawMessage) and item.tool_calls:
            try:
                check_tool_calls(item.tool_calls)
            except ValueError as exc:
                raise InputError(str(exc), path=source.path, line=item.line or None) from None
    notes = list(source.notes)
    if system is not None:
        items.insert(
            0, RawMessage("system", system, id="system-prompt", metadata={"from": "--system"})
        )
    elif not getattr(reader, "saves_system_prompt", True) and not any(
        isinstance(i, RawMessage) and i.role == "system" for i in items
    ):
        notes.append(
            f"the {name} file does not save the agent's system prompt, so no window counts one; "
            "give it with --system TEXT or --system @FILE (docs/framework-state.md)"
        )
    return build(
        items,
        path=source.path,
        format=name,
        skipped=source.skipped,
        warnings=source.warnings,
        notes=notes,
    )


def _check_choices(
    chosen: Selection, name: str, selects: Any, choices: dict[str, tuple[str, str]]
) -> None:
    for choice in chosen.given():
        if choice not in selects:
            flag, among = choices[choice]
            raise UsageError(f"{flag} choose among {among}; {name} files are read whole")


__all__ = [
    "DETECTION_ORDER",
    "FORMATS",
    "PATH_FORMATS",
    "detect_format",
    "detection_order",
    "formats",
    "get",
    "load",
    "names",
    "path_formats",
]
