"""Rich rendering for people. Transcript text is printed as Text objects (markup escaped)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from memdiag.render.common import gaps_text
from memdiag.render.literal import LiteralConsole
from memdiag.render.words import clip as _clip
from memdiag.replay import ReplayReport, StrategyReplay
from memdiag.survival import FactSurvival
from memdiag.turn_records import TurnRecord

if TYPE_CHECKING:
    from memdiag.checks import CheckReport
    from memdiag.diagnosis.verdicts import Diagnosis

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
    """Something left the window, was pinned or went over budget (``TurnRecords.changed``)."""
    return bool(r.evicted or r.summarized or r.pinned or r.overflow or r.dropped_by_session)


def fact_cell(f: FactSurvival) -> Text:
    """A fact's fate under one strategy, in words. A `session_end` loss is no eviction: the
    fact was kept to the last turn of its session (a new session starts with a new window)."""
    if f.kept_by == "memories":
        return Text("kept (memories)", style="green")
    if f.stated_at_turn is None:
        return Text("never stated", style="dim")
    if f.lost_at_turn is None:
        held = {"verbatim": "kept verbatim", "summary": "kept in the summary"}
        cell = Text(held.get(f.kept_by or "", f"kept ({f.kept_by})"), style="green")
        gaps = gaps_text(f)
        if gaps:
            cell.append(f", lost {gaps}", style="yellow")
        return cell
    if f.mechanism == "session_end":
        return Text(f"kept to session end (turn {f.lost_at_turn - 1})", style="green")
    how = {"summarized_away": "summarized away", "unpinned": "unpinned"}
    return Text(
        f"{how.get(f.mechanism or '', f.mechanism or 'lost')} at turn {f.lost_at_turn}", style="red"
    )


def render_replay(console: Console, report: ReplayReport, show: str = "changes") -> None:
    """The answer first: which strategy kept each tracked fact; then each strategy's totals;
    the turns where the window changed only on request (``--show changes|all``)."""
    t = report.transcript
    head = Text()
    head.append(f"{t.path}", style="bold")
    budget = f"budget {report.budget} tokens"
    if report.budget_recorded:
        budget += " (the largest request the trace recorded; --budget to change)"
    head.append(
        f"  {_count(len(t.messages), 'message')}, {_count(len(t.turns), 'turn')}, "
        f"{_count(len(t.sessions), 'session')}; encoding {report.encoding}; {budget}"
    )
    console.print(head)
    render_survival(console, report)
    render_memory_files(console, report)  # a coding-agent session: its instruction files
    render_compactions(console, report)  # and what each compaction kept and dropped
    if show == "none":
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        for res in report.results:
            grid.add_row(res.name, _totals(res) + _calls_note(res))
        console.print(grid)
        console.print(
            "turn by turn: --show changes (turns where something left the window) or --show all",
            style="dim",
        )
        return
    legend = Text("window: ")
    plain = colourless(console)
    for section, style in SECTION_STYLE.items():
        legend.append(_glyph(section, plain) + " ", style=style)
        legend.append(section + "  ")
    console.print(legend, style="dim")
    for res in report.results:
        render_strategy(console, res, show)


def _calls_note(res: StrategyReplay) -> str:
    """Recorded requests in one clause: how far the provider's prompt tokens are from ours."""
    diffs = sorted({c.difference for c in res.calls if c.difference is not None})
    if not res.calls:
        return ""
    note = f"; {_count(len(res.calls), 'recorded request')}"
    if not diffs:
        return note
    spread = f"{diffs[0]:+d}" if len(diffs) == 1 else f"{diffs[0]:+d} to {diffs[-1]:+d}"
    return note + f", provider-reported prompt tokens {spread} against the recount"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _totals(res: StrategyReplay) -> str:
    turns = res.turns  # read from the records' columns: no record is made for the totals
    peak = max(turns.column("total"), default=0)
    evicted, summarized, over = turns.count(1), turns.count(2), len(turns.overflow)
    return (
        f"peak {peak}/{res.budget} tokens, {evicted} evicted, {summarized} summarized, "
        f"{over} over budget"
    )


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
        if isinstance(c.meta.get("instructions"), str):  # `/compact <instructions>`
            facts.append(f"asked to: {_clip(c.meta['instructions'])}")
        summarizer = c.meta.get("summarizer")
        if isinstance(summarizer, dict) and isinstance(summarizer.get("agent"), str):
            size = summarizer.get("prompt_tokens")
            facts.append(
                f"summarized by {summarizer['agent']}"
                + (f" (its request: {size} tokens reported)" if isinstance(size, int) else "")
            )
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
    records = res.turns
    listed: Sequence[int] = range(len(records))
    if show != "all":
        listed = [k for k in listed if records.changed(k)]
    # a long transcript has thousands of such turns: show the first and last ones (and make
    # the records of those only)
    cut = show == "changes" and len(listed) > 2 * CHANGES_SHOWN
    head, tail = (listed[:CHANGES_SHOWN], listed[-CHANGES_SHOWN:]) if cut else (listed, [])
    for k in head:
        console.print(turn_line(records[k], res.budget, colourless(console)))
    if cut:
        console.print(
            f"      … {_count(len(listed) - 2 * CHANGES_SHOWN, 'more turn')} with changes "
            "(--show all, or --format json|--html for every turn)",
            style="dim",
        )
    for k in tail:
        console.print(turn_line(records[k], res.budget, colourless(console)))
    hidden = len(res.turns) - len(listed)
    if hidden and show == "changes":
        console.print(
            f"      ({_count(hidden, 'turn')} where nothing left the window not shown; --show all)",
            style="dim",
        )
    console.print(_totals(res), style="bold")
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


def _fits(table: Table, width: int) -> bool:
    """Fit ``table`` in ``width`` without cutting a word or a header, setting column widths
    (Rich's own collapse cuts headers with an ellipsis); False when it cannot fit."""
    cols = table.columns
    texts = [[str(x) for x in [c.header, *c.cells]] for c in cols]
    natural = [max(len(t) for t in ts) for ts in texts]
    least = [max(len(w) for t in ts for w in [*t.split(), ""]) for ts in texts]
    room = width - (3 * len(cols) + 1)
    if sum(natural) <= room:
        return True
    if sum(least) > room:
        return False
    extra = room - sum(least)
    want = [n - m for n, m in zip(natural, least, strict=True)]
    total = sum(want) or 1
    for c, m, w in zip(cols, least, want, strict=True):
        c.width = m + extra * w // total
    return True


def render_survival(console: Console, report: ReplayReport) -> None:
    if not report.facts:
        console.print(
            "No facts tracked: pass --fact TEXT (the extractor found no strong facts and the "
            "transcript marks no `forgot` failure).",
            style="dim",
        )
        return
    title = "Fact survival" + (
        " (strong facts and `forgot` markers found in the transcript)" if report.facts_found else ""
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
        cells = [fact_cell(r.facts[k]) for r in report.results]
        table.add_row(Text(fact), Text(stated), *cells)
    if _fits(table, console.width):
        console.print(table)
        return
    # too many strategies for the width: one block per fact, a strategy a line
    console.print(title, style="italic")
    for k, fact in enumerate(report.facts):
        first = report.results[0].facts[k]
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column()
        stated = (
            "never stated"
            if first.stated_at_turn is None
            else (f"stated at turn {first.stated_at_turn} ({first.evidence_id})")
        )
        grid.add_row(Text(fact, style="bold"), Text(stated, style="dim"))
        for r in report.results:
            grid.add_row(Text("  " + r.name), fact_cell(r.facts[k]))
        console.print(grid)


VERDICT_STYLE = {"none": "green", "short_term": "yellow", "long_term": "red"}


def render_diagnoses(console: Console, transcript: str, diagnoses: Sequence[Diagnosis]) -> None:
    """One panel per failure: a label/value grid in words (``memdiag.render.words``), wrapped
    lines hanging under the value column."""
    from memdiag.render.words import diagnosis_lines, plural

    for d in diagnoses:
        style = VERDICT_STYLE.get(d.layer.value, "white")
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        for line in diagnosis_lines(d):
            value = Text(
                line.value, style=f"bold {style}" if line.style == "verdict" else line.style
            )
            if line.quote is not None:
                if line.value:
                    value.append(" ")
                value.append(f"“{line.quote}”", style="italic")
            grid.add_row(line.label, value)
        where = f"turn {d.at_turn}" + (f" ({d.marker_id})" if d.marker_id else "")
        console.print(
            Panel(
                grid,
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
            f"{plural(len(diagnoses), 'failure')} in {transcript}: "
            + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())),
            style="bold",
        )
    )


def render_checks(console: Console, report: CheckReport) -> None:
    """`memdiag check`: one line per case (✓/✗), each failure explained under its case."""
    for case in report.cases:
        line = Text()
        if case.passed:
            line.append("✓ ", style="bold green")
        else:
            line.append("✗ ", style="bold red")
        line.append(case.name)
        line.append(
            f"  {_count(case.expectations, 'expectation')}, {case.duration_s:.2f}s", style="dim"
        )
        console.print(line, soft_wrap=True)
        for failure, at in zip(case.failures, case.failure_lines, strict=True):
            detail = Text("    ")
            detail.append(f"line {at}: ", style="dim")
            detail.append(failure)
            # one line per failure even in a narrow CI log, so it stays greppable
            console.print(detail, soft_wrap=True)
    style = "bold green" if report.failed == 0 else "bold red"
    console.print(
        f"{report.passed} passed, {report.failed} failed ({_count(len(report.cases), 'case')} in "
        f"{escape(report.spec)})",
        style=style,
    )
