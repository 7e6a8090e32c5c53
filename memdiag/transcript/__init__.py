"""Transcript loading: one :func:`load` in front of a registry of input formats (SPEC §2)."""

from __future__ import annotations

from memdiag.transcript.formats import FORMATS, detect_format, load
from memdiag.transcript.model import Message, Probe, SummaryEvent, Transcript, Turn
from memdiag.transcript.source import read_source

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
