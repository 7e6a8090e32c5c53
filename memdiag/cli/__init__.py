"""The Typer app: parse flags, call one core function, render, map errors to exit codes.

Exit codes (docs/reference.md#commands): 0 ok; 1 a check failed / a failure found with --fail-on; 2
bad input or
usage; 3 internal error (one line plus where the traceback was written; --debug shows it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from memdiag import __version__
from memdiag.cli import fetch_model
from memdiag.cli.command import MemdiagCommand, MemdiagGroup
from memdiag.cli.options import (
    AtOpt,
    ConfigOpt,
    FactOpt,
    FactsFileOpt,
    FormatOpt,
    HtmlOpt,
    InputFlags,
    MemoryFileOpt,
    QuietOpt,
    StoreFlags,
    TopKOpt,
    TranscriptArg,
    WindowFlags,
    option_groups,
    settings_from,
)
from memdiag.cli.runtime import (
    errors,
    exit_now,
    fail_on_choices,
    html_target,
    load_transcript,
    narrate,
    output_target,
    progress,
    progress_stages,
    quiet_mode,
    run_state,
    stderr,
    store_problems,
    write_html,
)
from memdiag.cli.terminal import flags_without_a_type, strategies_progress
from memdiag.render import OutputFormat

flags_without_a_type()

app = typer.Typer(
    name="memdiag",
    cls=MemdiagGroup,
    help=(
        "Find which memory layer of an LLM agent forgot, and why.\n\n"
        "Replay transcripts through simulated context windows, diagnose 'the agent forgot X', "
        "audit long-term stores, and run memory regression checks in CI."
    ),
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)

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
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    run_state["debug"] = debug or bool(os.environ.get("MEMDIAG_DEBUG"))
    run_state["quiet"] = quiet
    run_state["exit_code"] = 0


@app.command(
    cls=MemdiagCommand,
    epilog=(
        "Examples:\n\n"
        "  memdiag replay fixtures/demo.jsonl --budget 300 --fact 'allergic to peanuts'\n\n"
        "  memdiag replay chat.jsonl --strategy all --budget 2000\n\n"
        "  memdiag replay otel_spans.json --strategy all   (observed windows beside simulated)\n\n"
        "  memdiag replay chat.jsonl --format json > replay.json\n\n"
        "  memdiag replay agent.db --session mia-trip --fact 'allergic to peanuts'"
    ),
)
@option_groups
def replay(
    transcript: TranscriptArg,
    fact: FactOpt = None,
    window: WindowFlags = WindowFlags(),
    facts_file: FactsFileOpt = None,
    memory_file: MemoryFileOpt = None,
    show: Annotated[
        str | None,
        typer.Option(
            help="Turns to list: changes, all, none. Default: changes for one strategy; for "
            "several (--strategy all), none: the fact survival and each strategy's totals."
        ),
    ] = None,
    html: HtmlOpt = None,
    output: FormatOpt = OutputFormat.table,
    config: ConfigOpt = None,
    quiet: QuietOpt = False,
    reading: InputFlags = InputFlags(),
) -> None:
    """Replay a transcript through simulated context windows, turn by turn.

    Shows what each strategy kept, evicted, summarized or pinned, with exact token counts by
    section, and when each tracked fact left the window (and by which mechanism).
    """
    with errors():
        quiet_mode(quiet)
        from memdiag.errors import UsageError
        from memdiag.replay import run, strategy_names
        from memdiag.stores.open import profile_memory

        if show not in (None, "changes", "all", "none"):
            raise UsageError(f"--show must be changes, all or none, not {show!r}")
        settings = settings_from(
            config,
            window.overrides(),
            **{"store.facts_file": str(facts_file) if facts_file else None},
        )
        t = load_transcript(transcript, reading)
        if not t.turns:
            stderr().print(
                "[yellow]warning:[/] no user messages, so no turn to replay "
                "(a turn starts at a user message)"
            )
        # the profile layer is injected whole at every session start: it takes window room
        memory = profile_memory(settings)
        from memdiag.memory_files import load_memory_files, with_memory_files

        files = load_memory_files(memory_file or ())  # so are the instruction files
        memory = with_memory_files(memory, files, settings.token_counter())
        per_strategy = len(t.turns)
        n = per_strategy * len(strategy_names(settings.strategy, t))
        recorder = None
        if html_target(html) is not None:
            from memdiag.render.report import TextRecorder

            recorder = TextRecorder(t)  # the summary and pinned text at every turn
        with progress("replaying", min_total=2000) as tick:
            advance = strategies_progress(tick, per_strategy, n) if tick is not None else None
            report = run(t, settings, fact or (), progress=advance, memory=memory, observe=recorder)
        report.memory_files = files
        if show is None:  # the answer first; the turns of several strategies on request
            show = "changes" if len(report.results) == 1 else "none"
        output.to_renderer().replay(report, show)
        if html is not None:
            from memdiag.render.report.build import replay_document

            write_html(html, replay_document(report, recorder, settings, memory[0]))


@app.command(
    cls=MemdiagCommand,
    epilog=(
        "Examples:\n\n"
        "  memdiag diagnose fixtures/demo.jsonl --budget 400          (every `forgot` marker)\n\n"
        "  memdiag diagnose chat.jsonl --fact 'allergic to peanuts' --at 40 --strategy summary\n\n"
        "  memdiag diagnose chat.jsonl --facts-file facts.json --chroma ./chroma --format json\n\n"
        "  memdiag diagnose chat.jsonl --chroma ./mem0_db --user-id mia "
        "--embedding-function default\n\n"
        "  memdiag diagnose chat.jsonl --store agno_memories.json   (a memory-store file, "
        "retrieved as its library does; a Qdrant folder: --store ./qdrant --user-id mia)\n\n"
        "  memdiag diagnose trace.json --fact 'allergic to peanuts' --at 8   (a trace: judged "
        "from the requests it recorded)\n\n"
        "  memdiag diagnose chat.jsonl --fail-on short_term,long_term   (exit 1 for CI)"
    ),
)
@option_groups
def diagnose(
    transcript: TranscriptArg,
    fact: FactOpt = None,
    at: AtOpt = None,
    window: WindowFlags = WindowFlags(),
    stores: StoreFlags = StoreFlags(),
    memory_file: MemoryFileOpt = None,
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
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Neither read nor write the embedding cache of the evidence ranking "
            "(under the user cache dir, or $MEMDIAG_CACHE_DIR).",
        ),
    ] = False,
    html: HtmlOpt = None,
    output: FormatOpt = OutputFormat.table,
    config: ConfigOpt = None,
    quiet: QuietOpt = False,
    reading: InputFlags = InputFlags(),
) -> None:
    """Say which memory layer lost a fact, with the evidence chain and the fix.

    Without --fact, every assistant message marked `forgot` in the transcript is diagnosed."""
    code = 0
    with errors():
        quiet_mode(quiet)
        from memdiag.diagnosis import LAYERS, failures_from, failures_from_probes
        from memdiag.diagnosis import diagnose as run_diagnose
        from memdiag.errors import UsageError
        from memdiag.replay import ReplayContext
        from memdiag.stores.open import LongTermStores

        layers = fail_on_choices(fail_on, LAYERS, "layer")
        if window.strategy == "all":
            raise UsageError(
                "--strategy all: diagnose judges under one strategy, and the what-if of each "
                "diagnosis already says which strategy keeps the fact; choose sliding_window, "
                "summary, scratchpad or observed (replay --strategy all shows them side by side)"
            )
        settings = settings_from(
            config, window.overrides(), stores.overrides(), **{"store.top_k": top_k}
        )
        html_target(html)
        from memdiag.memory_files import load_memory_files

        files = load_memory_files(memory_file or ())
        t = load_transcript(transcript, reading)
        if probes:
            if fact or at is not None:
                raise UsageError(
                    "--probes takes the facts and turns from the dataset: drop --fact/--at"
                )
            failures, left_out = failures_from_probes(t, str(transcript))
            if left_out:
                from memdiag.render.words import plural

                stderr().print(
                    f"{plural(left_out, 'QA item')} without an answer (adversarial) left out"
                )
        else:
            failures = failures_from(t, fact or (), at)
        with (
            LongTermStores.from_settings(settings) as opened,
            # a cold run embeds the transcript's sentences before the first fact is diagnosed
            progress_stages(("embedding sentences", 500), ("diagnosing", 2)) as (embed, tick),
        ):
            # a trace's own windows are the truth unless a simulated strategy is asked for
            observed = window.strategy in (None, "observed")
            kept: list[ReplayContext] = []  # the diagnosis's replay context, for --html
            diagnoses = run_diagnose(
                t,
                settings,
                failures,
                opened,
                progress=tick,
                observed=observed,
                cache=not no_cache,
                memory_files=files,
                keep=kept if html is not None else None,
                embedding=embed,
            )
            store_problems(opened.chroma)
            store_problems(opened.memory)
        if layers and any(d.layer in layers for d in diagnoses):
            run_state["exit_code"] = 1  # kept if the output pipe closes early
        output.to_renderer().diagnose(t.path, diagnoses)
        if html is not None:
            from memdiag.memory_files import with_memory_files
            from memdiag.render.report.build import diagnose_document
            from memdiag.render.words import diagnosis_lines, lines_to_dicts
            from memdiag.stores.open import profile_memory

            dicts = [d.to_dict() for d in diagnoses]
            lines = [lines_to_dicts(diagnosis_lines(d)) for d in diagnoses]
            memory = with_memory_files(profile_memory(settings), files, settings.token_counter())
            context = kept[0] if kept else None
            write_html(html, diagnose_document(t, settings, dicts, memory, lines, context))
        if layers and any(d.layer in layers for d in diagnoses):
            code = 1
    raise typer.Exit(code)


@app.command(
    "inspect-store",
    cls=MemdiagCommand,
    epilog=(
        "Examples:\n\n"
        "  memdiag inspect-store --facts-file facts.json\n\n"
        "  memdiag inspect-store --chroma ./chroma_db --collection memories --format json\n\n"
        "  memdiag inspect-store --chroma ./mem0_db --user-id mia    (one user of a mem0 store)\n\n"
        "  memdiag inspect-store --chroma ./langchain_db --embedding-function default\n\n"
        "  memdiag inspect-store --store memory.jsonl    (MCP memory graph, LangGraph, Agno...)\n\n"
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
    quiet: QuietOpt = False,
) -> None:
    """Audit long-term stores: a facts file, Chroma collections, a memory-store file (read-only).

    Finds duplicates, near-duplicates, conflicts, stale entries, strong facts kept only in the
    vector store, distance-metric pitfalls, missing metadata and facts-file/vector disagreements."""
    code = 0
    with errors():
        quiet_mode(quiet)
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
        if not (settings.store.facts_file or settings.store.chroma or settings.store.memory_store):
            raise UsageError("nothing to inspect: pass --facts-file, --chroma and/or --store")
        with (
            LongTermStores.from_settings(settings) as opened,
            progress("auditing", min_total=5000) as tick,
        ):
            args = (opened.facts, opened.chroma, opened.collection, settings.audit, tick)
            report = audit(*args, others=[opened.memory] if opened.memory else [])
            store_problems(opened.chroma)
        output.to_renderer().audit(report)
        if fail_on is not None:
            worst = SEVERITIES.index(fail_on)
            if any(SEVERITIES.index(f.severity) <= worst for f in report.findings):
                code = 1
    raise typer.Exit(code)


@app.command(
    cls=MemdiagCommand,
    epilog=(
        "Examples:\n\n"
        "  memdiag convert locomo10.json -o conv.jsonl\n\n"
        "  memdiag convert chats.json --from sharegpt > chats.jsonl\n\n"
        "  memdiag convert agent.db --session mia-trip > trip.jsonl\n\n"
        "  memdiag convert conversations.json --conversation 'Lisbon trip' > lisbon.jsonl"
    ),
)
@option_groups
def convert(
    source: Annotated[Path, typer.Argument(help="Input file in any supported format.")],
    out: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here (default: stdout).")
    ] = None,
    reading: InputFlags = InputFlags(),
    quiet: QuietOpt = False,
) -> None:
    """Convert any supported transcript format to canonical JSONL."""
    with errors():
        quiet_mode(quiet)
        from memdiag.fileio import atomic_write
        from memdiag.transcript.writer import write_canonical

        output_target(out)
        t = load_transcript(source, reading)
        if out is None:
            write_canonical(t, sys.stdout)
            return
        with atomic_write(out) as fp:  # never leave a half-written file behind
            write_canonical(t, fp)
        from memdiag.render.words import plural

        narrate(
            f"wrote {plural(len(t.messages), 'message')} in {plural(len(t.sessions), 'session')} "
            f"to {out}"
        )


@app.command(
    cls=MemdiagCommand,
    epilog=(
        "Examples:\n\n"
        "  memdiag check   (memdiag-checks.yaml here or in a parent folder)\n\n"
        "  memdiag check memdiag-checks.yaml --junit report.xml --jobs 4\n\n"
        "  memdiag check memdiag-checks.yaml --html report.html   (timeline of every case)\n\n"
        "  memdiag check memdiag-checks.yaml --format json > check.json\n\n"
        "Spec (paths are relative to the spec file):\n\n"
        "\b\n"  # click: keep these lines as they are (YAML: the indentation is the structure)
        "  version: 1\n"
        "  defaults:\n"
        "    model: gpt-4o\n"
        "    strategy: {name: sliding_window, budget: 2000}\n"
        "  cases:\n"
        "    - name: allergy stays pinned\n"
        "      transcript: chat.jsonl\n"
        "      strategy: {name: scratchpad, budget: 800}\n"
        "      expect:\n"
        "        - kept: allergic to peanuts\n"
        "          at_turn: 40\n\n"
        "Expectations: kept / lost (at_turn, kept_by), verdict / in_layer (fact, at_turn; default "
        "every `forgot` marker), fact_key (equals), max_findings {kind: n}. With "
        "GITHUB_ACTIONS=true each failure is also printed as a ::error annotation."
    ),
)
def check(
    spec: Annotated[
        Path | None,
        typer.Argument(
            help="Check spec (YAML); default: memdiag-checks.yaml here or in a parent folder."
        ),
    ] = None,
    output: FormatOpt = OutputFormat.table,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write a JUnit XML report here.")
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="Run cases in this many processes.")
    ] = 1,
    html: HtmlOpt = None,
    config: ConfigOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Run memory regression checks from a YAML spec (for CI).

    Facts kept or lost at a turn, verdicts of marked failures, facts-file values, store hygiene.
    Exit 0 all passed, 1 a check failed, 2 the spec is invalid.
    """
    code = 0
    with errors():
        quiet_mode(quiet)
        from memdiag.checks import check as run_checks

        html_target(html)
        output_target(junit)
        if spec is None:
            from memdiag.checks.spec import default_spec

            spec = default_spec()
        base = settings_from(config)
        with progress("checking", min_total=2) as tick:
            report = run_checks(spec, base, jobs, tick, keep_contexts=html is not None)
        run_state["exit_code"] = 0 if report.ok else 1  # kept if the output pipe closes early
        if junit is not None:
            from memdiag.render.junit import write_junit

            write_junit(report, junit)
        if html is not None:
            from memdiag.render.report.checks import check_document

            write_html(html, check_document(spec, base, report))
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


# registered here so that the command list keeps its order; the body is its own module
app.command("fetch-model", cls=MemdiagCommand, epilog=fetch_model.EPILOG)(fetch_model.fetch_model)


def main() -> None:
    """The ``memdiag`` command. SIGTERM (a CI timeout, ``kill``) exits as Ctrl-C does, through
    every cleanup: a store's temporary copy is removed, a half-written output never lands.
    A finished run ends without the interpreter's teardown where that is safe (``exit_now``)."""
    import signal

    from memdiag.collector import collect_less_often
    from memdiag.threads import watch_pools

    collect_less_often()  # the run's objects live to its end (memdiag.collector)

    def _terminated(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _terminated)
    watch_pools()  # numpy's and onnxruntime's idle threads do not keep the fast exit away
    try:
        app()  # Typer's standalone mode ends in SystemExit
        code: object = 0
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
    if not isinstance(code, int):  # a message: the normal exit prints it (exit 1)
        raise SystemExit(code)
    exit_now(code)
