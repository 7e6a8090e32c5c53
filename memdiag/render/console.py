"""Rich rendering for people. Transcript text is printed as Text objects (markup escaped)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from memdiag.render.common import gaps_text, plain
from memdiag.render.literal import LiteralConsole
from memdiag.replay import FactSurvival, ReplayReport, StrategyReplay, TurnRecord

if TYPE_CHECKING:
    from memdiag.checks import CheckReport
    from memdiag.diagnosis.verdicts import Details, Diagnosis
    from memdiag.stores.audit import AuditReport

CHANGES_SHOWN = 20  # turns with changes listed at each end of a long replay

SECTION_STYLE = {
    "system": "blue",
    "scratchpad": "magenta",
    "summary": "yellow",
    "memories": "cyan",
    "messages": "green",
}


def _ids(ids: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" … (+{len(ids) - limit})" if len(ids) > limit else "")


class _PipeConsole(LiteralConsole):
    """Rich exits with status 1 when the reader of stdout goes away (`memdiag ... | head`);
    exit 1 means a failed check, so the broken pipe is handed to the CLI, which exits 0.
    Text from input prints literally (no control characters, no hyperlinks: LiteralConsole)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def stdout_console() -> Console:
    """The console for human output on stdout."""
    return _PipeConsole(highlight=False)


# Without colour (NO_COLOR, a pipe, a file) each section keeps its own character.
SECTION_GLYPH = {
    "system": "#",
    "scratchpad": "P",
    "summary": "~",
    "memories": "M",
    "messages": "=",
}


def colourless(console: Console) -> bool:
    """True when the console shows no colour, so the bars must differ by character."""
    return bool(console.no_color) or console.color_system is None


def _glyph(section: str, plain: bool) -> str:
    return SECTION_GLYPH[section] if plain else "█"


def usage_bar(tokens: dict[str, int], budget: int, width: int = 24, plain: bool = False) -> Text:
    """A bar of the window split by section, scaled to the budget."""
    bar = Text()
    used = 0
    for section, style in SECTION_STYLE.items():
        n = tokens.get(section, 0)
        cells = round(width * n / budget) if budget else 0
        cells = min(cells, width - used)
        bar.append(_glyph(section, plain) * cells, style=style)
        used += cells
    bar.append("·" * (width - used), style="dim")
    return bar


def turn_line(r: TurnRecord, budget: int, plain: bool = False) -> Text:
    line = Text()
    line.append(f"{r.turn:>5} ", style="bold")
    line.append(f"{r.session}·{r.session_turn:<3} ", style="dim")
    line.append_text(usage_bar(r.tokens, budget, plain=plain))
    total = r.tokens["total"]
    line.append(f" {total:>6}/{budget}", style="red bold" if total > budget else "")
    if r.entered:
        line.append(f"  +{_ids(r.entered)}", style="green")
    if r.evicted:
        line.append(f"  evicted {_ids(r.evicted)}", style="red")
    if r.summarized:
        line.append(f"  summarized {_ids(r.summarized)}", style="yellow")
    if r.dropped_by_session:
        line.append(f"  session start: dropped {len(r.dropped_by_session)}", style="dim")
    for p in r.pinned:
        was = f" (was {p.previous})" if p.previous else ""
        line.append(f"  pinned {p.field}={p.value}{was}", style="magenta")
    if r.overflow:
        line.append("  OVER BUDGET (newest message alone does not fit)", style="red bold")
    return line


def interesting(r: TurnRecord) -> bool:
    return bool(r.evicted or r.summarized or r.pinned or r.overflow or r.dropped_by_session)


def fact_cell(f: FactSurvival) -> Text:
    if f.kept_by == "memories":
        return Text("kept (memories)", style="green")
    if f.stated_at_turn is None:
        return Text("never stated", style="dim")
    if f.lost_at_turn is None:
        cell = Text(f"kept ({f.kept_by})", style="green")
        gaps = gaps_text(f)
        if gaps:
            cell.append(f", lost {gaps}", style="yellow")
        return cell
    return Text(f"lost at turn {f.lost_at_turn} ({f.mechanism})", style="red")


def render_replay(console: Console, report: ReplayReport, show: str = "changes") -> None:
    t = report.transcript
    head = Text()
    head.append(f"{t.path}", style="bold")
    head.append(
        f"  {len(t.messages)} messages, {len(t.turns)} turns, {len(t.sessions)} session(s)"
        f"  encoding {report.encoding}  budget {report.budget} tokens"
    )
    console.print(head)
    legend = Text("window: ")
    plain = colourless(console)
    for section, style in SECTION_STYLE.items():
        legend.append(_glyph(section, plain) + " ", style=style)
        legend.append(section + "  ")
    console.print(legend, style="dim")
    for res in report.results:
        render_strategy(console, res, show)
    render_memory_files(console, report)
    render_compactions(console, report)
    render_survival(console, report)


def render_memory_files(console: Console, report: ReplayReport) -> None:
    """The instruction files given with --memory-file: injected at every turn, and their rules."""
    for f in report.memory_files:
        console.rule(f"[bold]{escape(f.name)}[/] (every window: the memories section)")
        if not f.rules:
            console.print("no rules found (prohibitions, always, commands)", style="dim")
        for r in f.rules:
            console.print(
                Text(f"  line {r.line:>4}  {r.kind:<12} {_clip(r.text)}"), highlight=False
            )


def render_compactions(console: Console, report: ReplayReport) -> None:
    """Each compaction a coding agent recorded: its size before and after, and which of the
    user's instructions and strong facts stated before it the summary kept or dropped."""
    for c in report.compactions:
        where = f"line {c.line}" if c.line is not None else f"#{c.index}"
        console.rule(f"[bold]compaction {c.index} (session {escape(c.session)}, {where})[/]")
        facts = [p for p in (c.ts, f"trigger {c.trigger}" if c.trigger else None) if p]
        before = f"{c.tokens_before}" if c.tokens_before is not None else "?"
        after = f"{c.tokens_after}" if c.tokens_after is not None else "?"
        how = " (recounted)" if c.tokens_after_source == "recounted" else ""
        facts.append(f"{before} tokens before → {after} after{how}")
        facts.append(f"replaced {len(c.replaced)} messages (turns 1-{c.after_turn})")
        stated = len(c.kept) + len(c.dropped)
        facts.append(
            f"its summary kept {len(c.kept)} of the {stated} instructions and strong facts "
            "stated before it"
        )
        console.print(" · ".join(facts), highlight=False)
        table = Table(title_justify="left", title="stated before the compaction")
        table.add_column("summary")
        table.add_column("turn", justify="right")
        table.add_column("statement")
        if c.what_if:
            table.add_column(f"what-if at {c.what_if_budget} tokens (turn {c.what_if_turn})")
        for st in c.dropped:
            keepers = c.what_if.get(st.text, {})
            kept = ", ".join(k for k, v in keepers.items() if v) or "none"
            row: list[Text] = [
                Text("dropped, in memories", style="yellow")
                if st.in_memories
                else Text("dropped", style="red"),
                Text(str(st.turn)),
                Text(_clip(st.text)),
            ]
            table.add_row(*row, *([Text(f"kept by {kept}")] if c.what_if else []))
        for st in c.kept:
            row = [Text("kept", style="green"), Text(str(st.turn)), Text(_clip(st.text))]
            table.add_row(*row, *([Text("")] if c.what_if else []))
        if c.kept or c.dropped:
            console.print(table)
        console.print(Panel(Text(_clip(c.summary, 1200)), title="its summary", expand=False))


def render_strategy(console: Console, res: StrategyReplay, show: str) -> None:
    console.rule(f"[bold]{escape(res.name)}[/]")
    turns = res.turns if show == "all" else [r for r in res.turns if interesting(r)]
    if show != "none":
        # a long transcript has thousands of such turns: show the first and last ones
        cut = show == "changes" and len(turns) > 2 * CHANGES_SHOWN
        head, tail = (turns[:CHANGES_SHOWN], turns[-CHANGES_SHOWN:]) if cut else (turns, [])
        for r in head:
            console.print(turn_line(r, res.budget, colourless(console)))
        if cut:
            console.print(
                f"      … {len(turns) - 2 * CHANGES_SHOWN} more turns with changes "
                "(--show all, or --format json|--html for every turn)",
                style="dim",
            )
        for r in tail:
            console.print(turn_line(r, res.budget, colourless(console)))
        hidden = len(res.turns) - len(turns)
        if hidden and show == "changes":
            console.print(
                f"      ({hidden} turns where nothing left the window not shown; --show all)",
                style="dim",
            )
    peak = max((r.tokens["total"] for r in res.turns), default=0)
    evicted = sum(len(r.evicted) for r in res.turns)
    summarized = sum(len(r.summarized) for r in res.turns)
    console.print(
        f"peak window {peak}/{res.budget} tokens · {evicted} evicted · {summarized} summarized"
        f" · {sum(r.overflow for r in res.turns)} over budget",
        style="bold",
    )
    if res.calls:
        render_calls(console, res)
    if res.final is not None and res.final.pinned:
        console.print(Panel(Text(res.final.pinned), title="pinned at last turn", expand=False))
    if res.final is not None and res.final.summary:
        console.print(Panel(Text(res.final.summary), title="summary at last turn", expand=False))


def render_calls(console: Console, res: StrategyReplay) -> None:
    """Recorded requests: tokens recounted exactly beside the provider's reported prompt tokens."""
    reported = [c for c in res.calls if c.reported is not None]
    if not reported:
        console.print(f"{len(res.calls)} recorded requests (no provider token counts)", style="dim")
        return
    table = Table(
        title="recorded requests: recounted vs reported prompt tokens", title_justify="left"
    )
    for col in ("turn", "reply", "recounted", "reported", "difference"):
        table.add_column(col, justify="left" if col == "reply" else "right")
    shown = reported if len(reported) <= 2 * CHANGES_SHOWN else reported[:CHANGES_SHOWN]
    for c in shown:
        diff = c.difference or 0
        table.add_row(
            str(c.turn),
            c.before,
            str(c.recounted) if c.exact else f"≥{c.recounted}",
            str(c.reported),
            Text(f"{diff:+d}", style="yellow" if diff else "green"),
        )
    console.print(table)
    if len(shown) < len(reported):
        console.print(f"      … {len(reported) - len(shown)} more (--format json)", style="dim")


def render_survival(console: Console, report: ReplayReport) -> None:
    if not report.facts:
        console.print(
            "No facts tracked: pass --fact TEXT (the extractor found no strong facts).",
            style="dim",
        )
        return
    title = "Fact survival" + (
        " (strong facts found in the transcript)" if report.facts_found else ""
    )
    table = Table(title=title, title_justify="left")
    table.add_column("fact")
    table.add_column("stated")
    for res in report.results:
        table.add_column(res.name)
    for k, fact in enumerate(report.facts):
        first = report.results[0].facts[k]
        stated = (
            f"turn {first.stated_at_turn} ({first.evidence_id})"
            if first.stated_at_turn is not None
            else "-"
        )
        table.add_row(Text(fact), Text(stated), *(fact_cell(r.facts[k]) for r in report.results))
    console.print(table)


VERDICT_STYLE = {"none": "green", "short_term": "yellow", "long_term": "red"}


def render_diagnoses(console: Console, transcript: str, diagnoses: Sequence[Diagnosis]) -> None:
    for d in diagnoses:
        style = VERDICT_STYLE.get(d.layer.value, "white")
        body = Text()
        body.append("verdict  ", style="dim")
        body.append(d.verdict.value, style=f"bold {style}")
        body.append(f"   layer {d.layer.value}", style=style)
        if d.flags:
            body.append("   flags " + ", ".join(d.flags), style="magenta")
        body.append("\n")
        body.append("evidence ", style="dim")
        det = d.details
        stated = any(e.passes for e in d.evidence)
        if not stated:  # never stated: what was searched, then the nearest candidates
            body.append((det.searched or "none found") + "\n")
        for k, e in enumerate(d.evidence[:3]):
            if k or not stated:
                body.append("nearest  " if not stated and not k else "         ", style="dim")
            body.append(f"{e.id} (turn {e.turn}, session {e.session}, {e.method} {e.score:.2f}) ")
            body.append(f"“{_clip(e.text)}”\n", style="italic")
        seen = det.observed
        if seen is not None:
            body.append("request  ", style="dim")
            size = f"{seen.tokens}" if seen.tokens_exact else f"at least {seen.tokens}"
            body.append(f"{seen.request} (turn {seen.request_turn}): {size} tokens")
            if seen.reported_prompt_tokens is not None:
                diff = seen.reported_prompt_tokens - seen.tokens
                body.append(f", provider reported {seen.reported_prompt_tokens} ({diff:+d})")
            body.append("\n")
            if seen.lost_at_turn is not None:
                body.append("lost     ", style="dim")
                body.append(f"turn {seen.lost_at_turn} ({seen.mechanism}), observed\n")
        short = det.short_term
        if short is not None and short.lost_at_turn is not None:
            body.append("lost     ", style="dim")
            body.append(
                f"turn {short.lost_at_turn} ({short.mechanism}) under {short.strategy}, "
                f"budget {short.budget}\n"
            )
        if short is not None:
            body.append("window   ", style="dim")
            body.append(f"{short.window_tokens}/{short.budget} tokens at turn {d.at_turn}\n")
        wi = short.what_if if short is not None else (seen.what_if if seen is not None else None)
        if wi is not None:
            kept = ", ".join(
                f"{k} {'keeps' if v else 'loses'}" for k, v in wi.kept_by_strategy.items()
            )
            at = f" at {seen.what_if_budget} tokens" if seen is not None else ""
            body.append("what-if  ", style="dim")
            body.append(
                f"{kept}{at}; smallest sliding budget {wi.smallest_sliding_window_budget}\n"
            )
        for key, value in _store_lines(det):
            body.append(f"{key:<9}", style="dim")
            body.append(f"{plain(value)}\n")
        for fix in d.fixes:
            body.append("fix      ", style="dim")
            body.append(fix + "\n")
        body.rstrip()
        where = f"turn {d.at_turn}" + (f" ({d.marker_id})" if d.marker_id else "")
        console.print(
            Panel(
                body,
                title=f"[bold]forgot “{escape(d.fact)}” at {escape(where)}[/]",
                title_align="left",
                border_style=style,
            )
        )
    counts: dict[str, int] = {}
    for d in diagnoses:
        counts[d.verdict.value] = counts.get(d.verdict.value, 0) + 1
    console.print(
        Text(
            f"{len(diagnoses)} failure(s) in {transcript}: "
            + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())),
            style="bold",
        )
    )


def _store_lines(det: Details) -> list[tuple[str, object]]:
    """What the long-term checks and the semantic search saw, one (label, value) per line."""
    lt = det.long_term
    lines: list[tuple[str, object]] = []
    if det.recorded is not None and det.recorded.searches:
        lines.append(("recorded", [s.to_dict() for s in det.recorded.searches]))
    if lt is not None:
        if lt.retrieval is not None:
            lines.append(("retrieval", lt.retrieval.to_dict()))
        if lt.facts_file is not None:
            lines.append(("facts_file", lt.facts_file.to_dict()))
        if lt.stores_checked:
            lines.append(("stores_checked", list(lt.stores_checked)))
        if lt.skipped_reason is not None:
            lines.append(("skipped_reason", lt.skipped_reason))
    if det.semantic_search is not None:
        lines.append(("semantic", det.semantic_search))
    return lines


def _clip(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def render_checks(console: Console, report: CheckReport) -> None:
    """`memdiag check`: one line per case (✓/✗), each failure explained under its case."""
    for case in report.cases:
        line = Text()
        if case.passed:
            line.append("✓ ", style="bold green")
        else:
            line.append("✗ ", style="bold red")
        line.append(case.name)
        line.append(f"  {case.expectations} expectation(s), {case.duration_s:.2f}s", style="dim")
        console.print(line, soft_wrap=True)
        for failure, at in zip(case.failures, case.failure_lines, strict=True):
            detail = Text("    ")
            detail.append(f"line {at}: ", style="dim")
            detail.append(failure)
            # one line per failure even in a narrow CI log, so it stays greppable
            console.print(detail, soft_wrap=True)
    style = "bold green" if report.failed == 0 else "bold red"
    console.print(
        f"{report.passed} passed, {report.failed} failed ({len(report.cases)} case(s) in "
        f"{escape(report.spec)})",
        style=style,
    )


SEVERITY_STYLE = {"error": "red bold", "warning": "yellow", "info": "cyan"}


def render_audit(console: Console, report: AuditReport) -> None:
    """Stores, layer (memory tier) counts and findings of `memdiag inspect-store`."""
    from memdiag.stores.audit import FactsFileSummary

    stores = Table(title="Stores", title_justify="left")
    for col in ("store", "what", "size", "details"):
        stores.add_column(col, overflow="fold")
    for s in report.stores:
        if isinstance(s, FactsFileSummary):
            collisions = len(s.normalization_collisions)
            stores.add_row(
                Text(s.location),
                f"facts file ({s.shape})",
                f"{s.keys} keys",
                f"{s.superseded_values} superseded values, {collisions} key collisions",
            )
        else:
            ef = s.embedding_function or "none"
            retrieval = s.retrieval_checks
            stores.add_row(
                Text(f"{s.location} [{s.collection}]"),
                f"chroma {s.mode}",
                f"{s.count} records",
                Text(
                    (f"layout {s.layout.name} (text in {s.layout.text_from}), " if s.layout else "")
                    + (
                        f"{s.scope}: {s.records_read} read, {s.out_of_scope} other tenants' "
                        "records left out, "
                        if s.scope
                        else ""
                    )
                    + f"dim {s.dimension}, space {s.space}, embedding function {ef}, "
                    f"retrieval checks {retrieval}"
                    + (f" ({s.retrieval_reason})" if retrieval != "available" else "")
                    + "".join(f"\n{p}" for p in s.problems)
                ),
            )
    console.print(stores)
    console.print(
        "layers: " + ", ".join(f"{tier} {n}" for tier, n in report.tiers.items()), style="bold"
    )
    if not report.findings:
        console.print("No findings: the stores look clean.", style="green bold")
        return
    table = Table(title=f"Findings ({len(report.findings)})", title_justify="left")
    for col in ("severity", "kind", "ids", "message"):
        table.add_column(col, overflow="fold")
    for f in report.findings:
        table.add_row(
            Text(f.severity, style=SEVERITY_STYLE.get(f.severity, "")),
            f.kind,
            Text(_ids(list(f.ids), 4)),
            Text(f.message),
        )
    console.print(table)
    counts = report.by_kind()
    console.print(", ".join(f"{k} {n}" for k, n in counts.items() if n), style="bold")
