"""Renderers: turn core result objects into tables, JSON, JUnit XML, HTML. Core never prints.

The output formats are a closed enum; :meth:`OutputFormat.to_renderer` gives the one renderer
object of a format, which renders every command (:data:`COMMANDS`).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memdiag.render.renderers import Renderer

# the commands every renderer renders (a method of that name on each renderer)
COMMANDS = ("replay", "diagnose", "audit", "check")


class OutputFormat(str, Enum):
    """The closed set of output formats; every command maps each one to a renderer."""

    table = "table"
    json = "json"
    jsonl = "jsonl"

    def to_renderer(self) -> Renderer:
        """The renderer of this format (imported here: `memdiag --help` stays light)."""
        from memdiag.render.renderers import RENDERERS

        return RENDERERS[self.value]()
