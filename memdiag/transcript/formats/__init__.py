"""The registry of input formats (SPEC §2): one module per format, imported here, one way.

Each format module follows :class:`~memdiag.transcript.formats.base.Format` and imports only
``base``, :mod:`memdiag.transcript.source` and :mod:`memdiag.transcript.model`. To add a
format: write its module, then list it in ``FORMATS`` and ``DETECTION_ORDER`` below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memdiag.errors import InputError, UsageError, clip
from memdiag.transcript.formats import (
    anthropic,
    canonical,
    chatgpt,
    claude,
    langchain,
    langfuse,
    langsmith,
    letta,
    locomo,
    longmemeval,
    openai,
    openai_agents,
    openai_responses,
    otel,
    request_log,
    sharegpt,
)
from memdiag.transcript.formats.base import Format, PathFormat
from memdiag.transcript.model import RawItem, RawMessage, Transcript, build
from memdiag.transcript.source import Source, check_tool_calls, read_source

SHAPE_ERROR = "a value of another type than the"
# what a reader raises on a value it did not check (a string where an object belongs, "" where
# a number belongs): input errors all the same, so one line and exit 2, never a traceback
_UNCHECKED = (AttributeError, TypeError, KeyError, IndexError, ValueError, OverflowError)

_ALL: tuple[Format, ...] = (
    canonical,
    openai,
    anthropic,
    langchain,
    sharegpt,
    locomo,
    longmemeval,
    openai_responses,
    openai_agents,
    chatgpt,
    claude,
    otel,
    langsmith,
    langfuse,
    letta,
    request_log,
)
# name → format, in the order that help and error messages list them
FORMATS: dict[str, Format] = {f.name: f for f in _ALL}
# the order in which auto-detection asks: Responses items before canonical and openai (a bare
# first `{"role", "content"}` item would go to them, then `function_call` fails); the exports;
# langchain and anthropic before openai, which would read any `{"messages": [...]}` but miss
# LangChain's message dumps and Anthropic's tool_result blocks
# the trace formats come first: their documents are never chats, but a chat reader could take
# their message lists for one
DETECTION_ORDER: tuple[Format, ...] = (
    otel,
    langsmith,
    langfuse,
    letta,
    request_log,
    openai_responses,
    chatgpt,
    claude,
    langchain,
    anthropic,
    canonical,
    openai,
    sharegpt,
    locomo,
    longmemeval,
    openai_agents,  # never from parsed JSON: an SQLite file is detected by PATH_FORMATS
)
# formats read from the file itself rather than from parsed JSON (an SQLite database)
PATH_FORMATS: tuple[PathFormat, ...] = (openai_agents,)


def detect_format(source: Source) -> str:
    for fmt in DETECTION_ORDER:
        if fmt.detect(source):
            return fmt.name
    raise InputError(
        "unrecognised transcript format; expected canonical JSONL (SPEC §2) or one of: "
        + ", ".join(FORMATS)
        + " (use --from NAME)",
        path=source.path,
    )


def load(
    path: str | Path,
    fmt: str | None = None,
    *,
    skip_invalid: bool = False,
    select: str | None = None,
    agent: str | None = None,
) -> Transcript:
    """Load a transcript in any supported format (auto-detected unless ``fmt`` is given).

    ``select`` picks the conversation of a file that holds several (a chat export, an Agents
    SDK database) by id or title, or ``all``; without it such a file raises ChoiceNeeded,
    which lists them. ``agent`` picks the agent of a file of LLM calls (docs/traces.md).
    """
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    by_path = next(
        (f for f in PATH_FORMATS if f.name == fmt or (fmt is None and f.detect_path(path))),
        None,
    )
    items: list[RawItem]
    if by_path is not None:
        source, items = by_path.read_path(path, skip_invalid, select)
        name = by_path.name
    else:
        source = read_source(path, skip_invalid)
        try:
            name = fmt or detect_format(source)
        except _UNCHECKED as exc:
            raise InputError(
                f"{SHAPE_ERROR} format detection expects ({type(exc).__name__}: {clip(exc)})",
                path=source.path,
            ) from None
        reader: Any = FORMATS[name]
        if select is not None and not hasattr(reader, "select_flag"):
            raise UsageError(
                "--session/--conversation choose among the conversations of an export or an "
                f"Agents SDK database; a {name} file is read whole"
            )
        if agent is not None and not getattr(reader, "reads_calls", False):
            raise UsageError(
                f"--agent chooses among the agents of a file of LLM calls; a {name} file has none"
            )
        try:
            if hasattr(reader, "select_flag"):  # holds several conversations: choose
                items = list(reader.read(source, skip_invalid, select=select))
            elif getattr(reader, "reads_calls", False):
                items = list(reader.read(source, skip_invalid, agent=agent))
            else:
                items = list(reader.read(source, skip_invalid))
        except _UNCHECKED as exc:
            # a value of a type the reader did not check (a string where an object belongs):
            # bad input all the same, so exit 2 with one line, never a traceback
            raise InputError(
                f"{SHAPE_ERROR} {name} reader expects ({type(exc).__name__}: {clip(exc)})",
                path=source.path,
            ) from None
    if not any(isinstance(i, RawMessage) for i in items):
        raise InputError("no messages found", path=source.path)
    for item in items:  # every format: a tool call the counter and writer can read
        if isinstance(item, RawMessage) and item.tool_calls:
            try:
                check_tool_calls(item.tool_calls)
            except ValueError as exc:
                raise InputError(str(exc), path=source.path, line=item.line or None) from None
    return build(
        items,
        path=source.path,
        format=name,
        skipped=source.skipped,
        warnings=source.warnings,
    )


__all__ = ["DETECTION_ORDER", "FORMATS", "PATH_FORMATS", "Format", "detect_format", "load"]
