"""``inspect-store`` for people: each store as a label/value block, findings grouped by kind.

A table of four narrow columns split words and record ids mid-token and repeated the same
long advice on every finding; here each kind is a heading with its shared advice said once,
each finding one indented entry (its own words, then its ids, which wrap only between ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from memdiag.stores.audit import AuditReport, Finding, StoreSummary

SEVERITY_STYLE = {"error": "red bold", "warning": "yellow", "info": "cyan"}
IDS_SHOWN = 4
SHARED_MIN = 40  # characters: a shorter common ending is not worth saying apart


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _grid() -> Table:
    grid = Table.grid(padding=(0, 2), pad_edge=False)
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


def store_rows(s: StoreSummary) -> tuple[str, list[tuple[str, str]]]:
    """A store's heading and its (label, value) rows, in words."""
    from memdiag.stores.audit import FactsFileSummary

    if isinstance(s, FactsFileSummary):
        rows = [
            ("kind", f"facts file ({s.shape}), {_count(s.keys, 'key')}"),
            (
                "history",
                f"{_count(s.superseded_values, 'superseded value')}, "
                f"{_count(len(s.normalization_collisions), 'key collision')}",
            ),
        ]
        return s.location, rows
    head = f"{s.location}, collection {s.collection}"
    if s.layout is not None and s.layout.bookkeeping:
        return head, [("skipped", s.retrieval_reason)]
    kind = f"{s.type} {s.mode}" if s.type != "store" else "memory-store file"
    if s.type == "store":
        head = s.location
    if s.layout is not None:
        kind += f", written by {s.layout.name} (text in {s.layout.text_from})"
    rows = [("kind", kind), ("records", str(s.count))]
    if s.scope:
        rows.append(
            (
                "scope",
                f"{s.scope}: {s.records_read} read, "
                f"{_count(s.out_of_scope, 'record')} of other tenants left out",
            )
        )
    dims = "no vectors" if s.dimension is None else f"{s.dimension} dimensions"
    rows.append(("vectors", dims if s.type == "store" else f"{dims}, {s.space} distance"))
    if s.type != "store":
        rows.append(
            (
                "embeddings",
                f"{s.embedding_function} (persisted with the collection)"
                if s.embedding_function
                else "no embedding function persisted with the collection",
            )
        )
    if s.retrieval_checks == "available":
        rows.append(("retrieval", f"checked with {s.retrieval_reason}"))
    else:
        rows.append(("retrieval", f"not checked: {s.retrieval_reason}"))
    rows += [("problem", p) for p in s.problems]
    return head, rows


def shared_ending(messages: Sequence[str]) -> str:
    """The words every message ends with (at a word boundary), when long enough to say once."""
    if len(messages) < 2:
        return ""
    end = messages[0]
    for m in messages[1:]:
        k = 0
        while k < min(len(end), len(m)) and end[-1 - k] == m[-1 - k]:
            k += 1
        end = end[len(end) - k :]
    cut = end.find(" ")
    end = end[cut + 1 :] if cut >= 0 and not all(m == end for m in messages) else end
    # a value that happens to be the same ('Lisbon', a date) belongs to each finding
    words = end.split(" ")
    while words and any(c.isdigit() or c in "'\"" for c in words[0]):
        words.pop(0)
    end = " ".join(words)
    # every message must keep words of its own
    if len(end) < SHARED_MIN or any(len(m) - len(end) < 3 for m in messages):
        return ""
    return end


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:IDS_SHOWN])
    return shown + (f" … (+{len(ids) - IDS_SHOWN})" if len(ids) > IDS_SHOWN else "")


def render_audit(console: Console, report: AuditReport) -> None:
    """Stores, layer (memory tier) counts and findings of `memdiag inspect-store`."""
    console.print(Text("Stores", style="bold underline"))
    for s in report.stores:
        title, rows = store_rows(s)
        console.print(Text(title, style="bold"))
        grid = _grid()
        for label, value in rows:
            grid.add_row("  " + label, Text(value))
        console.print(grid)
    console.print(
        "layers: " + ", ".join(f"{tier} {n}" for tier, n in report.tiers.items()), style="bold"
    )
    if not report.findings:
        console.print("No findings: the stores look clean.", style="green bold")
        return
    console.print(Text(f"Findings ({len(report.findings)})", style="bold underline"))
    groups: dict[str, list[Finding]] = {}
    for f in report.findings:
        groups.setdefault(f.kind, []).append(f)
    for kind, found in groups.items():
        shared = shared_ending([f.message for f in found])
        heading = Text()
        heading.append(found[0].severity, style=SEVERITY_STYLE.get(found[0].severity, ""))
        heading.append(f"  {kind}", style="bold")
        heading.append(f" ({len(found)})" if len(found) > 1 else "")
        console.print(heading)
        grid = _grid()
        if shared:
            grid.add_row("  each", Text(shared.strip(" ;,"), style="italic"))
        for f in found:
            own = f.message[: len(f.message) - len(shared)].rstrip(" ;,") if shared else f.message
            entry = Text(own)
            if f.ids:
                entry.append("\n" + ("ids " if len(f.ids) > 1 else "id ") + _ids(f.ids), "dim")
            grid.add_row("  •", entry)
        console.print(grid)
    counts = report.by_kind()
    console.print(", ".join(f"{k} {n}" for k, n in counts.items() if n), style="bold")
