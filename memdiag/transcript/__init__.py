"""Transcript loading: one :func:`load` in front of a registry of input formats
(docs/reference.md#transcript-input).

The names below are resolved on first use (PEP 562), so that importing a light submodule such
as :mod:`memdiag.transcript.blocks` does not import every format reader.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memdiag.transcript.formats import FORMATS, detect_format, load
    from memdiag.transcript.model import Message, Probe, SummaryEvent, Transcript, Turn
    from memdiag.transcript.source import read_source

_HOME = {
    "FORMATS": "memdiag.transcript.formats",
    "detect_format": "memdiag.transcript.formats",
    "load": "memdiag.transcript.formats",
    "Message": "memdiag.transcript.model",
    "Probe": "memdiag.transcript.model",
    "SummaryEvent": "memdiag.transcript.model",
    "Transcript": "memdiag.transcript.model",
    "Turn": "memdiag.transcript.model",
    "read_source": "memdiag.transcript.source",
}

__all__ = [
    "FORMATS",
    "Message",
    "Probe",
    "SummaryEvent",
    "Transcript",
    "Turn",
    "detect_format",
    "load",
    "read_source",
]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
