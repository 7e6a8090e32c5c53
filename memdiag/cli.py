"""The Typer app: parse flags, call one core function, render, map errors to exit codes.

Exit codes (SPEC §5): 0 ok; 1 a check failed / a failure found with --fail-on; 2 bad input or
usage; 3 internal error (one line plus where the traceback was written; --debug shows it).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from memdiag import __version__
from memdiag.errors import MemdiagError
from memdiag.render import OutputFormat

if TYPE_CHECKING:  # only for annotations: keeps `memdiag --help` light
    from memdiag.config import Settings
    from memdiag.transcript import Transcript

app = typer.Typer(
    name="memdiag",
    help=(
        "Find which memory layer of an LLM agent forgot, and why.\n\n"
        "Replay transcripts through simulated context windows, diagnose 'the agent forgot X', "
        "audit long-term stores, and run memory regression checks in CI."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False}

# --- shared options, declared once ---------------------------------------------------------

TranscriptArg = Annotated[
    Path, typer.Argument(help="Transcript file: canonical JSONL or a supported format.")
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="YAML config (default: ./memdiag.yaml if present)."),
]
FormatOpt = Annotated[
    OutputFormat, typer.Option("--format", "-f", help="Output format.", case_sensitive=False)
]
ModelOpt = Annotated[
    str | None,
    typer.Option(help="Model name: picks the tiktoken encoding and the default context size."),
]
EncodingOpt = Annotated[
    str | None, typer.Option(help="tiktoken encoding (overrides --model): o200k_base, cl100k_base.")
]
BudgetOpt = Annotated[
    int | None,
    typer.Option(
        help="Most tokens the window may hold, all sections together "
        "(default: context size minus reserve_output)."
    ),
]
StrategyOpt = Annotated[
    str | None,
    typer.Option(
        "--strategy", "-s", help="sliding_window, summary, scratchpad, or all (side by side)."
    ),
]
MaxTurnsOpt = Annotated[
    int | None, typer.Option(help="Sliding window: keep at most this many recent turns.")
]
FactOpt = Annotated[
    list[str] | None,
    typer.Option("--fact", help="A fact the agent should remember (repeatable)."),
]
FromOpt = Annotated[
    str | None,
    typer.Option(
        "--from",
        help="Input format (default: auto-detect): canonical, openai, anthropic, langchain, "
        "sharegpt, locomo, longmemeval.",
    ),
]
SkipInvalidOpt = Annotated[
    bool, typer.Option("--skip-invalid", help="Skip malformed lines and report how many.")
]
SummarizerOpt = Annotated[
    str | None, typer.Option(help="Summary strategy: extractive (default), recorded or llm.")
]
HtmlOpt = Annotated[
    Path | None,
    typer.Option("--html", help="Also write a standalone HTML report to this file."),
]
SummaryMaxOpt = Annotated[
    int | None, typer.Option(help="Summary: the running summary never exceeds this many tokens.")
]
TriggerOpt = Annotated[
    int | None, typer.Option(help="Summary: compress when the window passes this many tokens.")
]
KeepRecentOpt = Annotated[
    int | None, typer.Option(help="Summary: tokens kept verbatim after a compression.")
]
PinnedMaxOpt = Annotated[
    int | None, typer.Option(help="Scratchpad: pinned fields never exceed this many tokens.")
]
RulesOpt = Annotated[
    Path | None, typer.Option("--rules", help="Scratchpad: extra extraction rules (YAML).")
]


def strategy_flags(
    max_turns: int | None,
    summarizer: str | None,
    summary_max_tokens: int | None,
    trigger_tokens: int | None,
    keep_recent_tokens: int | None,
    scratchpad_max_tokens: int | None,
    rules: Path | None,
) -> dict[str, Any]:
    """The strategy flags shared by replay and diagnose, as dotted settings overrides."""
    return {
        "sliding_window.max_turns": max_turns,
        "summary.summarizer": summarizer,
        "summary.summary_max_tokens": summary_max_tokens,
        "summary.trigger_tokens": trigger_tokens,
        "summary.keep_recent_tokens": keep_recent_tokens,
        "scratchpad.scratchpad_max_tokens": scratchpad_max_tokens,
        "scratchpad.rules": str(rules) if rules else None,
    }


AtOpt = Annotated[
    int | None, typer.Option("--at", help="Turn at which the agent failed (default: last turn).")
]
FactsFileOpt = Annotated[
    Path | None, typer.Option("--facts-file", help="JSON facts file (profile layer, exact keys).")
]
ChromaOpt = Annotated[
    str | None,
    typer.Option("--chroma", help="Chroma store: a persistent directory or http://host:port."),
]
CollectionOpt = Annotated[
    str | None, typer.Option("--collection", help="Chroma collection (default: all).")
]
TopKOpt = Annotated[int | None, typer.Option("--top-k", help="Memories retrieved per query.")]


# --- error boundary -------------------------------------------------------------------------


def _fail(message: str, code: int) -> NoReturn:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"[red bold]memdiag:[/] {escape(message)}"
    )
    raise typer.Exit(code)


@contextmanager
def errors() -> Iterator[None]:
    """Map expected failures to one line and an exit code; unexpected ones to exit 3."""
    try:
        yield
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except MemdiagError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BrokenPipeError:
        # the reader went away (`memdiag convert x | head`): not an error; silence the flush
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(0) from None
    except Exception as exc:
        if _state["debug"]:
            traceback.print_exc()
            raise typer.Exit(3) from None
        fd, path = tempfile.mkstemp(prefix="memdiag-traceback-", suffix=".txt")
        with os.fdopen(fd, "w") as fp:
            traceback.print_exc(file=fp)
        _fail(
            f"internal error: {type(exc).__name__}: {exc} (traceback: {path}; --debug shows it)", 3
        )


def stdout() -> Any:
    from rich.console import Console

    return Console(highlight=False)


def stderr() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(obj: Any) -> None:
    from memdiag.render.jsonout import dumps

    sys.stdout.write(dumps(obj) + "\n")


@contextmanager
def progress_bar(
    total: int, label: str, threshold: int = 2000
) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr for long runs on a terminal; None otherwise."""
    if total < threshold or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=stderr(),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        step = max(1, total // 200)

        def advance(done: int) -> None:
            if done % step == 0 or done == total:
                bar.update(task, completed=done)

        yield advance


@contextmanager
def count_progress(
    label: str, min_total: int = 5000
) -> Iterator[Callable[[int, int], None] | None]:
    """A (done, total) progress bar on stderr, shown once a run is large, on a terminal only."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=stderr(),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None, visible=False)

        def tick(done: int, total: int) -> None:
            if total >= min_total:
                bar.update(task, completed=done, total=total, visible=True)

        yield tick


def settings_from(config: Path | None, **flags: Any) -> Settings:
    from memdiag.config import load_settings
    from memdiag.strategies import validate_settings

    return validate_settings(load_settings(config).with_overrides(**flags))


def load_transcript(path: Path, fmt: str | None, skip_invalid: bool) -> Transcript:
    from memdiag.transcript import load

    transcript = load(path, fmt, skip_invalid=skip_invalid)
    err = stderr()
    for w in transcript.warnings[:20]:
        err.print(f"[yellow]warning:[/] {w}", markup=True, highlight=False)
    if transcript.skipped:
        err.print(f"[yellow]skipped {transcript.skipped} invalid line(s)[/]")
    return transcript


# --- commands -------------------------------------------------------------------------------


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memdiag {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks of internal errors.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    _state["debug"] = debug or bool(os.environ.get("MEMDIAG_DEBUG"))


@app.command(
    epilog=(
        "Examples:\n\n"
        "  memdiag replay fixtures/demo.jsonl --budget 300 --fact 'allergic to peanuts'\n\n"
        "  memdiag replay chat.jsonl --strategy all --budget 2000\n\n"
        "  memdiag replay chat.jsonl --format json > replay.json"
    )
)
def replay(
    transcript: TranscriptArg,
    fact: FactOpt = None,
    strategy: StrategyOpt = None,
    budget: BudgetOpt = None,
    max_turns: MaxTurnsOpt = None,
    model: ModelOpt = None,
    encoding: EncodingOpt = None,
    summarizer: SummarizerOpt = None,
    summary_max_tokens: SummaryMaxOpt = None,
    trigger_tokens: TriggerOpt = None,
    keep_recent_tokens: KeepRecentOpt = None,
    scratchpad_max_tokens: PinnedMaxOpt = None,
    rules: RulesOpt = None,
    facts_file: FactsFileOpt = None,
    show: Annotated[
        str, typer.Option(help="Turns to list: changes (default), all, none.")
    ] = "changes",
    html: HtmlOpt = None,
    output: FormatOpt = OutputFormat.table,
    config: ConfigOpt = None,
    input_format: FromOpt = None,
    skip_invalid: SkipInvalidOpt = False,
) -> None:
    """Replay a transcript through simulated context windows, turn by turn.

    Shows what each strategy kept, evicted, summarized or pinned, with exact token counts by
    section, and when each tracked fact left the window (and by which mechanism).
    """
    with errors():
        from memdiag.errors import UsageError
        from memdiag.replay import run

        if show not in ("changes", "all", "none"):
            raise UsageError(f"--show must be changes, all or none, not {show!r}")
        settings = settings_from(
            config,
            strategy=strategy,
            budget=budget,
            model=model,
            encoding=encoding,
            **{
                **strategy_flags(
                    max_turns,
                    summarizer,
                    summary_max_tokens,
                    trigger_tokens,
                    keep_recent_tokens,
                    scratchpad_max_tokens,
                    rules,
                ),
                "store.facts_file": str(facts_file) if facts_file else None,
            },
        )
        t = load_transcript(transcript, input_format, skip_invalid)
        if not t.turns:
            stderr().print(
                "[yellow]warning:[/] no user messages, so no turn to replay "
                "(a turn starts at a user message)"
            )
        memory = ("", 0)
        if settings.store.facts_file:
            # the profile layer is injected whole at every session start: it takes window room
            from memdiag.longterm import LongTermStores

            profile = LongTermStores.open(settings.store.facts_file, None, None)
            memory = profile.profile_section(settings)
        n = len(t.turns) * (3 if settings.strategy == "all" else 1)
        with progress_bar(n, "replaying") as advance:
            report = run(t, settings, fact or (), progress=advance, memory=memory)
        if output is OutputFormat.json:
            from memdiag.render.jsonout import replay_json

            emit_json(replay_json(t.path, report.encoding, report.budget, report.results))
        elif output is OutputFormat.jsonl:
            from memdiag.render.jsonout import replay_jsonl

            for line in replay_jsonl(report.results):
                sys.stdout.write(line + "\n")
        else:
            from memdiag.render.console import render_replay

            render_replay(stdout(), report, show)
        if html is not None:
            from memdiag.render.html import replay_html, write_html

            write_html(str(html), replay_html(report))
            stderr().print(f"wrote HTML report to {html}", markup=False)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  memdiag diagnose fixtures/demo.jsonl --budget 400          (every `forgot` marker)\n\n"
        "  memdiag diagnose chat.jsonl --fact 'allergic to peanuts' --at 40 --strategy summary\n\n"
        "  memdiag diagnose chat.jsonl --facts-file facts.json --chroma ./chroma --format json\n\n"
        "  memdiag diagnose chat.jsonl --fail-on short_term,long_term   (exit 1 for CI)"
    )
)
def diagnose(
    transcript: TranscriptArg,
    fact: FactOpt = None,
    at: AtOpt = None,
    strategy: StrategyOpt = None,
    budget: BudgetOpt = None,
    max_turns: MaxTurnsOpt = None,
    model: ModelOpt = None,
    encoding: EncodingOpt = None,
    summarizer: SummarizerOpt = None,
    summary_max_tokens: SummaryMaxOpt = None,
    trigger_tokens: TriggerOpt = None,
    keep_recent_tokens: KeepRecentOpt = None,
    scratchpad_max_tokens: PinnedMaxOpt = None,
    rules: RulesOpt = None,
    facts_file: FactsFileOpt = None,
    chroma: ChromaOpt = None,
    collection: CollectionOpt = None,
    top_k: TopKOpt = None,
    probes: Annotated[
        bool,
        typer.Option(
            "--probes",
            help="LoCoMo / LongMemEval: diagnose every QA item (answer = fact, question = "
            "retrieval query, the dataset's evidence ids = evidence).",
        ),
    ] = False,
    fail_on: Annotated[
        str | None,
        typer.Option(
            help="Exit 1 when a diagnosis falls in these layers: short_term,long_term,none."
        ),
    ] = None,
    html: HtmlOpt = None,
    output: FormatOpt = OutputFormat.table,
    config: ConfigOpt = None,
    input_format: FromOpt = None,
    skip_invalid: SkipInvalidOpt = False,
) -> None:
    """Say which memory layer lost a fact, with the evidence chain and the fix.

    Without --fact, every assistant message marked `forgot` in the transcript is diagnosed."""
    code = 0
    with errors():
        from memdiag.diagnose import LAYERS, failures_from, failures_from_probes
        from memdiag.diagnose import diagnose as run_diagnose
        from memdiag.errors import UsageError

        layers = [x.strip() for x in fail_on.split(",") if x.strip()] if fail_on else []
        bad = [x for x in layers if x not in LAYERS]
        if bad:
            raise UsageError(
                f"--fail-on: unknown layer {bad[0]!r}; choose from {', '.join(LAYERS)}"
            )
        settings = settings_from(
            config,
            strategy=strategy,
            budget=budget,
            model=model,
            encoding=encoding,
            **{
                **strategy_flags(
                    max_turns,
                    summarizer,
                    summary_max_tokens,
                    trigger_tokens,
                    keep_recent_tokens,
                    scratchpad_max_tokens,
                    rules,
                ),
                "store.facts_file": str(facts_file) if facts_file else None,
                "store.chroma": chroma,
                "store.collection": collection,
                "store.top_k": top_k,
            },
        )
        t = load_transcript(transcript, input_format, skip_invalid)
        if probes:
            if fact or at is not None:
                raise UsageError(
                    "--probes takes the facts and turns from the dataset: drop --fact/--at"
                )
            failures, left_out = failures_from_probes(t, str(transcript))
            if left_out:
                stderr().print(f"{left_out} QA item(s) without an answer (adversarial) left out")
        else:
            failures = failures_from(t, fact or (), at)
        from memdiag.longterm import LongTermStores

        with (
            LongTermStores.from_settings(settings) as stores,
            count_progress("diagnosing", min_total=2) as tick,
        ):
            diagnoses = run_diagnose(t, settings, failures, stores, progress=tick)
        if output is OutputFormat.table:
            from memdiag.render.console import render_diagnoses

            render_diagnoses(stdout(), t.path, diagnoses)
        else:
            from memdiag.render.jsonout import diagnose_json, diagnosis_json

            if output is OutputFormat.json:
                emit_json(diagnose_json(t.path, diagnoses))
            else:
                for d in diagnoses:
                    sys.stdout.write(json.dumps(diagnosis_json(d), ensure_ascii=False) + "\n")
        if html is not None:
            from memdiag.render.html import diagnose_html, write_html

            write_html(str(html), diagnose_html(t.path, diagnoses))
            stderr().print(f"wrote HTML report to {html}", markup=False)
        if layers and any(d.layer in layers for d in diagnoses):
            code = 1
    raise typer.Exit(code)


@app.command(
    "inspect-store",
    epilog=(
        "Examples:\n\n"
        "  memdiag inspect-store --facts-file facts.json\n\n"
        "  memdiag inspect-store --chroma ./chroma_db --collection memories --format json\n\n"
        "  memdiag inspect-store --facts-file facts.json --chroma http://127.0.0.1:8000 "
        "--fail-on warning"
    ),
)
def inspect_store(
    facts_file: FactsFileOpt = None,
    chroma: ChromaOpt = None,
    collection: CollectionOpt = None,
    threshold: Annotated[
        float | None,
        typer.Option(help="Embedding cosine at or above which two entries are near-duplicates."),
    ] = None,
    stale_after_days: Annotated[
        int | None, typer.Option(help="Report entries older than this many days as stale.")
    ] = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            help="Exit 1 when a finding has this severity or worse: error, warning, info."
        ),
    ] = None,
    output: FormatOpt = OutputFormat.table,
    config: ConfigOpt = None,
) -> None:
    """Audit long-term stores: a JSON facts file and/or a Chroma collection (read-only).

    Finds duplicates, near-duplicates, conflicts, stale entries, strong facts kept only in the
    vector store, distance-metric pitfalls, missing metadata and facts-file/vector disagreements."""
    code = 0
    with errors():
        from memdiag.errors import UsageError
        from memdiag.stores.audit import SEVERITIES, audit

        if fail_on is not None and fail_on not in SEVERITIES:
            raise UsageError(
                f"--fail-on: unknown severity {fail_on!r}; choose from {', '.join(SEVERITIES)}"
            )
        settings = settings_from(
            config,
            **{
                "store.facts_file": str(facts_file) if facts_file else None,
                "store.chroma": chroma,
                "store.collection": collection,
                "audit.near_duplicate_threshold": threshold,
                "audit.stale_after_days": stale_after_days,
            },
        )
        if not (settings.store.facts_file or settings.store.chroma):
            raise UsageError("nothing to inspect: pass --facts-file FILE and/or --chroma PATH|URL")
        from memdiag.longterm import LongTermStores

        with LongTermStores.from_settings(settings) as stores, count_progress("auditing") as tick:
            report = audit(stores.facts, stores.chroma, stores.collection, settings.audit, tick)
        if output is OutputFormat.table:
            from memdiag.render.console import render_audit

            render_audit(stdout(), report)
        elif output is OutputFormat.json:
            emit_json(report.to_dict())
        else:
            for f in report.findings:
                sys.stdout.write(json.dumps(f.to_dict(), ensure_ascii=False) + "\n")
        if fail_on is not None:
            worst = SEVERITIES.index(fail_on)
            if any(SEVERITIES.index(f.severity) <= worst for f in report.findings):
                code = 1
    raise typer.Exit(code)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  memdiag convert locomo10.json -o conv.jsonl\n\n"
        "  memdiag convert chats.json --from sharegpt > chats.jsonl"
    )
)
def convert(
    source: Annotated[Path, typer.Argument(help="Input file in any supported format.")],
    out: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here (default: stdout).")
    ] = None,
    input_format: FromOpt = None,
    skip_invalid: SkipInvalidOpt = False,
) -> None:
    """Convert any supported transcript format to canonical JSONL."""
    with errors():
        from memdiag.transcript.writer import write_canonical

        t = load_transcript(source, input_format, skip_invalid)
        if out is None:
            write_canonical(t, sys.stdout)
            return
        from memdiag.render import atomic_open

        with atomic_open(out) as fp:  # never leave a half-written file behind
            write_canonical(t, fp)
        stderr().print(f"wrote {len(t.messages)} messages in {len(t.sessions)} session(s) to {out}")


@app.command(
    epilog=(
        "Examples:\n\n"
        "  memdiag check memdiag-checks.yaml\n\n"
        "  memdiag check memdiag-checks.yaml --junit report.xml --jobs 4\n\n"
        "  memdiag check memdiag-checks.yaml --format json > check.json\n\n"
        "Spec (paths are relative to the spec file):\n\n"
        "  version: 1\n\n"
        "  defaults: {model: gpt-4o, strategy: {name: sliding_window, budget: 2000}}\n\n"
        "  cases:\n\n"
        "    - name: allergy stays pinned\n\n"
        "      transcript: chat.jsonl\n\n"
        "      strategy: {name: scratchpad, budget: 800}\n\n"
        "      expect: [{kept: allergic to peanuts, at_turn: 40}]\n\n"
        "Expectations: kept / lost (at_turn, kept_by), verdict / in_layer (fact, at_turn; default "
        "every `forgot` marker), fact_key (equals), max_findings {kind: n}. With "
        "GITHUB_ACTIONS=true each failure is also printed as a ::error annotation."
    )
)
def check(
    spec: Annotated[Path, typer.Argument(help="Check spec (YAML), e.g. memdiag-checks.yaml.")],
    output: FormatOpt = OutputFormat.table,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write a JUnit XML report here.")
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="Run cases in this many processes.")
    ] = 1,
    config: ConfigOpt = None,
) -> None:
    """Run memory regression checks from a YAML spec (for CI).

    Facts kept or lost at a turn, verdicts of marked failures, facts-file values, store hygiene.
    Exit 0 all passed, 1 a check failed, 2 the spec is invalid.
    """
    code = 0
    with errors():
        from memdiag.checks import check as run_checks

        with count_progress("checking", min_total=2) as tick:
            report = run_checks(spec, settings_from(config), jobs, tick)
        if junit is not None:
            from memdiag.render.junit import write_junit

            write_junit(report, junit)
        if output is OutputFormat.json:
            from memdiag.render.jsonout import check_json

            emit_json(check_json(report))
        elif output is OutputFormat.jsonl:
            from memdiag.render.jsonout import check_case_json

            for case in report.cases:
                sys.stdout.write(json.dumps(check_case_json(case), ensure_ascii=False) + "\n")
        else:
            from memdiag.render.console import render_checks

            render_checks(stdout(), report)
        if os.environ.get("GITHUB_ACTIONS") == "true":
            from memdiag.render.junit import github_annotations

            # The runner reads workflow commands from stdout and stderr alike; stderr keeps
            # --format json output pure.
            out = sys.stdout if output is OutputFormat.table else sys.stderr
            for line in github_annotations(report):
                out.write(line + "\n")
            out.flush()
        code = 0 if report.ok else 1
    raise typer.Exit(code)


def main() -> None:
    app()
