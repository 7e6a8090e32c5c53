"""Assemble the report page: template + style + script + the embedded JSON document.

The JSON sits in a ``<script type="application/json">`` element, with ``<``, ``>`` and ``&``
written as ``\\u003c``/``\\u003e``/``\\u0026``: no transcript text can close the element or
open markup, and ``JSON.parse`` restores it exactly. The script builds the page with
``textContent`` only. A Content-Security-Policy allows only this script (by its hash) and
inline style, no connections, no frames, no forms: even a bug in escaping could not run
injected code or reach the network.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from functools import cache
from html import escape
from importlib import resources
from typing import Any

from memdiag.fileio import atomic_write

_SLOT = re.compile(r"\{\{(\w+)\}\}")
_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def embed_json(obj: Any) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    # one replace per character, not str.translate: translate looks every character of a
    # megabyte document up in a dict (about 20 times slower); no replacement holds a character
    # that another one replaces, so the order does not matter
    for char, escaped in _ESCAPES.items():
        if char in text:
            text = text.replace(char, escaped)
    return text


@cache
def _asset(name: str) -> str:
    return resources.files("memdiag.render.report").joinpath(name).read_text(encoding="utf-8")


def report_page(doc: dict[str, Any]) -> str:
    """The whole HTML page for a document built by :func:`memdiag.render.report.document`."""
    script = _asset("report.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; img-src data:; "
        "connect-src 'none'; form-action 'none'; frame-src 'none'; base-uri 'none'"
    )
    parts = {
        "csp": escape(csp),
        "title": escape(str(doc.get("title", "memdiag report"))),
        "style": _asset("report.css"),
        "data": embed_json(doc),
        "script": script,
    }
    # one pass over the template: text put in one slot is never searched for another slot
    return _SLOT.sub(lambda m: parts[m.group(1)], _asset("report.html"))


def write_report(path: str, doc: dict[str, Any]) -> None:
    """Write the report atomically (a partial file is never left behind)."""
    with atomic_write(path) as fp:
        fp.write(report_page(doc))
