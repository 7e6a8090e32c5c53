"""Transcript loading: one :func:`load` in front of a registry of input formats (SPEC §2)."""

from __future__ import annotations

from memdiag.transcript.formats import FORMATS, detect_format, load, read_source
from memdiag.transcript.model import Message, SummaryEvent, Transcript, Turn

__all__ = [
    "FORMATS",
    "Message",
    "SummaryEvent",
    "Transcript",
    "Turn",
    "detect_format",
    "load",
    "read_source",
]
