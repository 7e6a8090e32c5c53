"""Renderers: turn core result objects into tables, JSON, JUnit XML. Core never prints."""

from __future__ import annotations

from enum import Enum


class OutputFormat(str, Enum):
    """The closed set of output formats; every command maps each one to a renderer."""

    table = "table"
    json = "json"
    jsonl = "jsonl"
