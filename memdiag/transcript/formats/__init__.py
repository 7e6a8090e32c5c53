"""The registry of input formats (SPEC §2): one module per format, imported here, one way.

Each format module follows :class:`~memdiag.transcript.formats.base.Format` and imports only
``base``, :mod:`memdiag.transcript.source` and :mod:`memdiag.transcript.model`. To add a
format: write its module, then list it in ``FORMATS`` and ``DETECTION_ORDER`` below.
"""

from __future__ import annotations

from pathlib import Path

from memdiag.errors import InputError
from memdiag.transcript.formats import (
    anthropic,
    canonical,
    langchain,
    locomo,
    longmemeval,
    openai,
    sharegpt,
)
from memdiag.transcript.formats.base import Format
from memdiag.transcript.model import RawMessage, Transcript, build
from memdiag.transcript.source import Source, read_source

_ALL: tuple[Format, ...] = (canonical, openai, anthropic, langchain, sharegpt, locomo, longmemeval)
# name → format, in the order that help and error messages list them
FORMATS: dict[str, Format] = {f.name: f for f in _ALL}
# the order in which auto-detection asks: anthropic before openai, which would read
# `{"messages": [...]}` but miss its tool_result blocks
DETECTION_ORDER: tuple[Format, ...] = (
    anthropic,
    canonical,
    openai,
    langchain,
    sharegpt,
    locomo,
    longmemeval,
)


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


def load(path: str | Path, fmt: str | None = None, *, skip_invalid: bool = False) -> Transcript:
    """Load a transcript in any supported format (auto-detected unless ``fmt`` is given)."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    source = read_source(path, skip_invalid)
    name = fmt or detect_format(source)
    items = list(FORMATS[name].read(source, skip_invalid))
    if not any(isinstance(i, RawMessage) for i in items):
        raise InputError("no messages found", path=source.path)
    return build(
        items,
        path=source.path,
        format=name,
        skipped=source.skipped,
        warnings=source.warnings,
    )


__all__ = ["DETECTION_ORDER", "FORMATS", "Format", "detect_format", "load"]
