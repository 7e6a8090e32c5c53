"""Consoles that print text from input literally.

Rich interprets ``[...]`` in strings as markup (``[link=URL]`` makes a live terminal hyperlink)
and passes control characters in ``Text`` straight to the terminal (an OSC 8 hyperlink, a
colour, a cleared screen, a bidi override that reorders what is shown). Renderers escape markup
where they format strings; :class:`LiteralConsole` then replaces every control character in
the text it renders, whatever the renderable, and drops hyperlinks, so nothing from a
transcript, a store or a spec can act on the terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

# C0 controls but tab and newline, DEL, C1 controls, bidi embeddings, overrides and isolates
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
REPLACEMENT = "\ufffd"


def strip_controls(text: str) -> str:
    """``text`` with each control character replaced by U+FFFD (same length)."""
    return _CONTROL.sub(REPLACEMENT, text)


def literal(text: str) -> str:
    """Input text for a markup string: controls replaced and ``[`` escaped."""
    return escape(strip_controls(text))


class LiteralConsole(Console):
    """A Rich console whose rendered text carries no control characters and no hyperlinks."""

    def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            text, style, control = segment
            if control is not None:  # Rich's own cursor moves (progress bars)
                yield segment
                continue
            if style is not None and style.link:
                style = style.clear_meta_and_links()
            if _CONTROL.search(text):
                text = strip_controls(text)
            yield Segment(text, style, control)
