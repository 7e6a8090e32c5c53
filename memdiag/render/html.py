"""Standalone HTML reports (`--html FILE`) for replay and diagnose.

One self-contained page, no scripts, no external assets. Every piece of transcript, store or
path text goes through :func:`html.escape`: a transcript cannot inject markup into a report.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from memdiag.diagnosis.verdicts import Diagnosis
from memdiag.render.common import atomic_open, gaps_text, plain
from memdiag.replay import FactSurvival, ReplayReport, StrategyReplay, TurnRecord

SECTION_COLORS = {
    "system": "#4c78a8",
    "scratchpad": "#b279a2",
    "summary": "#eeca3b",
    "memories": "#72b7b2",
    "messages": "#54a24b",
}
LAYER_COLORS = {"none": "#54a24b", "short_term": "#e45756", "long_term": "#9d3d9d"}

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0;width:100%}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4}.bar{display:flex;height:12px;width:240px;background:#eee}
.bar span{display:block;height:12px}.lost{color:#c0392b}.kept{color:#1e8449}
.dim{color:#777}.card{border:1px solid #ccc;border-left:6px solid;padding:.5em 1em;margin:1em 0}
code{background:#f6f6f6;padding:0 3px}.legend span{display:inline-block;width:10px;height:10px;
margin:0 4px 0 12px}
"""


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>\n"
        f"<h1>{escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def _bar(tokens: dict[str, int], budget: int) -> str:
    parts = []
    for section, color in SECTION_COLORS.items():
        n = tokens.get(section, 0)
        if n and budget:
            width = min(100.0, 100.0 * n / budget)
            parts.append(
                f"<span title='{escape(section)} {n}' style='width:{width:.2f}%;"
                f"background:{color}'></span>"
            )
    return f"<div class='bar'>{''.join(parts)}</div>"


def _ids(ids: Sequence[str]) -> str:
    return escape(", ".join(ids))


def _legend() -> str:
    items = "".join(
        f"<span style='background:{c}'></span>{escape(s)}" for s, c in SECTION_COLORS.items()
    )
    return f"<p class='legend dim'>window:{items}</p>"


def _turn_row(r: TurnRecord, budget: int) -> str:
    pins = "; ".join(f"{p.field}={p.value}" for p in r.pinned)
    return (
        f"<tr><td>{r.turn}</td><td>{escape(r.session)}·{r.session_turn}</td>"
        f"<td>{_bar(r.tokens, budget)}</td><td>{r.tokens['total']}/{budget}"
        f"{' <b class=lost>over</b>' if r.overflow else ''}</td>"
        f"<td>{_ids(r.entered)}</td><td class='lost'>{_ids(r.evicted)}</td>"
        f"<td>{_ids(r.summarized)}</td><td>{escape(pins)}</td></tr>"
    )


def _strategy(res: StrategyReplay) -> str:
    rows = "".join(_turn_row(r, res.budget) for r in res.turns)
    out = [
        f"<h2>{escape(res.name)}</h2>",
        "<table><tr><th>turn</th><th>session</th><th>window</th><th>tokens</th>"
        "<th>entered</th><th>evicted</th><th>summarized</th><th>pinned</th></tr>",
        rows,
        "</table>",
    ]
    if res.final is not None and res.final.pinned:
        out.append(f"<p><b>pinned at last turn</b></p><pre>{escape(res.final.pinned)}</pre>")
    if res.final is not None and res.final.summary:
        out.append(f"<p><b>summary at last turn</b></p><pre>{escape(res.final.summary)}</pre>")
    return "\n".join(out)


def _survival_cell(f: FactSurvival) -> str:
    if f.kept_by is not None and f.lost_at_turn is None:
        gaps = gaps_text(f)
        lost = f", <span class='lost'>lost {escape(gaps)}</span>" if gaps else ""
        return f"<span class='kept'>kept ({escape(f.kept_by)})</span>{lost}"
    if f.stated_at_turn is None:
        return "<span class='dim'>never stated</span>"
    return f"<span class='lost'>lost at turn {f.lost_at_turn} ({escape(str(f.mechanism))})</span>"


def replay_html(report: ReplayReport) -> str:
    """The replay of every strategy: per-turn windows and the fact-survival table."""
    t = report.transcript
    head = (
        f"<p>{escape(t.path)} — {len(t.messages)} messages, {len(t.turns)} turns, "
        f"{len(t.sessions)} session(s); encoding <code>{escape(report.encoding)}</code>, "
        f"budget {report.budget} tokens</p>{_legend()}"
    )
    survival = ""
    if report.facts:
        header = "".join(f"<th>{escape(r.name)}</th>" for r in report.results)
        rows = []
        for k, fact in enumerate(report.facts):
            cells = "".join(f"<td>{_survival_cell(r.facts[k])}</td>" for r in report.results)
            first = report.results[0].facts[k]
            stated = (
                f"turn {first.stated_at_turn} ({escape(str(first.evidence_id))})"
                if first.stated_at_turn is not None
                else "-"
            )
            rows.append(f"<tr><td>{escape(fact)}</td><td>{stated}</td>{cells}</tr>")
        survival = (
            "<h2>Fact survival</h2><table><tr><th>fact</th><th>stated</th>"
            f"{header}</tr>{''.join(rows)}</table>"
        )
    body = head + survival + "\n".join(_strategy(r) for r in report.results)
    return _page("memdiag replay", body)


def _details(details: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><th>{escape(str(k))}</th><td>{escape(plain(v, '; '))}</td></tr>"
        for k, v in details.items()
    )
    return f"<table>{rows}</table>"


def diagnose_html(transcript: str, diagnoses: Sequence[Diagnosis]) -> str:
    """One card per failure: verdict, layer, evidence, details and fixes."""
    cards = []
    for d in diagnoses:
        color = LAYER_COLORS.get(d.layer.value, "#888")
        evidence = "".join(
            f"<li><code>{escape(e.id)}</code> turn {e.turn}, session {escape(e.session)}, "
            f"{escape(e.method)} {e.score:.2f}: “{escape(e.text)}”</li>"
            for e in d.evidence
        )
        fixes = "".join(f"<li>{escape(f)}</li>" for f in d.fixes)
        flags = f" — flags: {escape(', '.join(d.flags))}" if d.flags else ""
        where = f"turn {d.at_turn}" + (f" ({escape(d.marker_id)})" if d.marker_id else "")
        cards.append(
            f"<div class='card' style='border-left-color:{color}'>"
            f"<h2>forgot “{escape(d.fact)}” at {where}</h2>"
            f"<p><b>{escape(d.verdict.value)}</b> — layer {escape(d.layer.value)}{flags}</p>"
            f"<p>evidence</p><ul>{evidence or '<li>none</li>'}</ul>"
            f"{_details(d.details.to_dict())}<p>fixes</p><ul>{fixes}</ul></div>"
        )
    head = f"<p>{escape(transcript)} — {len(diagnoses)} failure(s)</p>"
    return _page("memdiag diagnose", head + "\n".join(cards))


def write_html(path: str, text: str) -> None:
    """Write a report atomically (a partial file is never left behind)."""
    with atomic_open(path) as fp:
        fp.write(text)
