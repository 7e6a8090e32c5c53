"""The Typer app: parse flags, call one core function, render, map errors to exit codes.

Exit codes (SPEC §5): 0 ok; 1 a check failed / a failure found with --fail-on; 2 bad input or
usage; 3 internal error (one line plus where the traceback was written; --debug shows it).
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from memdiag import __version__
from memdiag.cli.options import (
    AtOpt,
    ConfigOpt,
    FactOpt,
    FactsFileOpt,
    FormatOpt,
    FromOpt,
    HtmlOpt,
    SkipInvalidOpt,
    StoreFlags,
    TopKOpt,
    TranscriptArg,
    WindowFlags,
    option_groups,
    settings_from,
)
from memdiag.errors import MemdiagError
from memdiag.render import OutputFormat

if TYPE_CHECKING:  # only for annotations: keeps `memdiag --help` light
    from rich.console import Console

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

# --- error boundary and output ---------------------------------------------------------------


def _fail(message: str, code: int) -> NoReturn:
    from rich.markup import escape

    stderr().print(f"[red bold]memdiag:[/] {escape(message)}")
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


def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


@contextmanager
def progress(label: str, min_total: int) -> Iterator[Callable[[int, int], None] | None]:
    """A (done, total) progress bar on stderr, shown once a run has ``min_total`` steps, on a
    terminal only (None otherwise)."""
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
        # redrawn by tick() only: no refresh thread, so `check --jobs` may fork its workers
        auto_refresh=False,
    ) as bar:
        task = bar.add_task(label, total=None, visible=False)

        def tick(done: int, total: int) -> None:
            # a few hundred redraws at most, however long the run
            if total >= min_total and (done % max(1, total // 200) == 0 or done == total):
                bar.update(task, completed=done, total=total, visible=True, refresh=True)

        yield tick


def load_transcript(path: Path, fmt: str | None, skip_invalid: bool) -> Transcript:
    from memdiag.transcript import load

    transcript = load(path, fmt, skip_invalid=skip_invalid)
    err = stderr()
    for w in transcript.warnings[:20]:
        err.print(f"[yellow]warning:[/] {w}", markup=True, highlight=False)
    if transcript.skipped:
        err.print(f"[yellow]skipped {transcript.skipped} invalid line(s)[/]")
    return transcript


def fail_on_choices(value: str | None, choices: tuple[str, ...], what: str) -> list[str]:
    """The comma-separated --fail-on values, each one of ``choices``."""
    from memdiag.errors import UsageError

    chosen = [x.strip() for x in value.split(",") if x.strip()] if value else []
    bad = [x for x in chosen if x not in choices]
    if bad:
        raise UsageError(f"--fail-on: unknown {what} {bad[0]!r}; choose from {', '.join(choices)}")
    return chosen


def write_html(path: Path, page: str) -> None:
    from memdiag.render.html import write_html

    write_html(str(path), page)
    stderr().print(f"wrote HTML report to {path}", markup=False)


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
@option_groups
def replay(
    transcript: TranscriptArg,
    fact: FactOpt = None,
    window: WindowFlags = WindowFlags(),
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
        from memdiag.stores.open import profile_memory

        if show not in ("changes", "all", "none"):
            raise UsageError(f"--show must be changes, all or none, not {show!r}")
        settings = settings_from(
            config,
            window.overrides(),
            **{"store.facts_file": str(facts_file) if facts_file else None},
        )
        t = load_transcript(transcript, input_format, skip_invalid)
        if not t.turns:
            stderr().print(
                "[yellow]warning:[/] no user messages, so no turn to replay "
                "(a turn starts at a user message)"
            )
        # the profile layer is injected whole at every session start: it takes window room
        memory = profile_memory(settings)
        n = len(t.turns) * (3 if settings.strategy == "all" else 1)
        with progress("replaying", min_total=2000) as tick:
            advance = (lambda done: tick(done, n)) if tick is not None else None
            report = run(t, settings, fact or (), progress=advance, memory=memory)
        output.to_renderer().replay(report, show)
        if html is not None:
            from memdiag.render.html import replay_html

            write_html(html, replay_html(report))


@app.command(
    epilog=(
        "Examples:\n\n"
        "  memdiag diagnose fixtures/demo.jsonl --budget 400          (every `forgot` marker)\n\n"
        "  memdiag diagnose chat.jsonl --fact 'allergic to peanuts' --at 40 --strategy summary\n\n"
        "  memdiag diagnose chat.jsonl --facts-file facts.json --chroma ./chroma --format json\n\n"
        "  memdiag diagnose chat.jsonl --fail-on short_term,long_term   (exit 1 for CI)"
    )
)
@option_groups
def diagnose(
    transcript: TranscriptArg,
    fact: FactOpt = None,
    at: AtOpt = None,
    window: WindowFlags = WindowFlags(),
    stores: StoreFlags = StoreFlags(),
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
        from memdiag.diagnosis import LAYERS, failures_from, failures_from_probes
        from memdiag.diagnosis import diagnose as run_diagnose
        from memdiag.errors import UsageError
        from memdiag.stores.open import LongTermStores

        layers = fail_on_choices(fail_on, LAYERS, "layer")
        settings = settings_from(
            config, window.overrides(), stores.overrides(), **{"store.top_k": top_k}
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
        with (
            LongTermStores.from_settings(settings) as opened,
            progress("diagnosing", min_total=2) as tick,
        ):
            diagnoses = run_diagnose(t, settings, failures, opened, progress=tick)
        output.to_renderer().diagnose(t.path, diagnoses)
        if html is not None:
            from memdiag.render.html import diagnose_html

            write_html(html, diagnose_html(t.path, diagnoses))
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
@option_groups
def inspect_store(
    stores: StoreFlags = StoreFlags(),
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
        from memdiag.stores.open import LongTermStores

        if fail_on is not None and fail_on not in SEVERITIES:
            raise UsageError(
                f"--fail-on: unknown severity {fail_on!r}; choose from {', '.join(SEVERITIES)}"
            )
        settings = settings_from(
            config,
            stores.overrides(),
            **{
                "audit.near_duplicate_threshold": threshold,
                "audit.stale_after_days": stale_after_days,
            },
        )
        if not (settings.store.facts_file or settings.store.chroma):
            raise UsageError("nothing to inspect: pass --facts-file FILE and/or --chroma PATH|URL")
        with (
            LongTermStores.from_settings(settings) as opened,
            progress("auditing", min_total=5000) as tick,
        ):
            report = audit(
                opened.facts, opened.chroma, opened.collection, settings.audit, tick
            )
        output.to_renderer().audit(report)
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
        from memdiag.render.common import atomic_open

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

        with progress("checking", min_total=2) as tick:
            report = run_checks(spec, settings_from(config), jobs, tick)
        if junit is not None:
            from memdiag.render.junit import write_junit

            write_junit(report, junit)
        output.to_renderer().check(report)
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
