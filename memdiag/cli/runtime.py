"""The CLI's runtime: the error boundary (exit codes), consoles, progress, loading inputs."""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from memdiag.errors import MemdiagError, clip

if TYPE_CHECKING:
    from rich.console import Console

    from memdiag.cli.options import InputFlags
    from memdiag.stores.chroma import ChromaStore
    from memdiag.transcript import Transcript

run_state = {"debug": False, "quiet": False, "exit_code": 0}

# --- error boundary and output ---------------------------------------------------------------


def _fail(message: str, code: int) -> NoReturn:
    from memdiag.render.literal import literal

    stderr(errors=True).print(f"[red bold]memdiag:[/] {literal(message)}")
    raise typer.Exit(code)


@contextmanager
def errors() -> Iterator[None]:
    """Map expected failures to one line and an exit code; unexpected ones to exit 3."""
    try:
        yield
        notes()
    except (typer.Exit, typer.Abort, SystemExit):
        notes()
        raise
    except MemdiagError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BrokenPipeError:
        # the reader went away (`memdiag replay x | head`): not an error, so the exit code is
        # the command's own (1 only for a failed check); silence the final flush
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(int(run_state["exit_code"])) from None
    except Exception as exc:
        if run_state["debug"]:
            traceback.print_exc()
            raise typer.Exit(3) from None
        import tempfile  # only for a crash

        fd, path = tempfile.mkstemp(prefix="memdiag-traceback-", suffix=".txt")
        with os.fdopen(fd, "w") as fp:
            traceback.print_exc(file=fp)
        _fail(
            f"internal error: {type(exc).__name__}: {clip(exc, 200)} "
            f"(traceback: {path}; --debug shows it)",
            3,
        )


def notes() -> None:
    """What a whole run should hear once, not per finding: the embedding model was missing."""
    from memdiag.stores.embeddings import missing_model_note, take_model_misses

    for tried in take_model_misses():
        narrate(f"note: {missing_model_note(tried)}")


# what Rich would change in a plain line: an emoji code (":smile:") it replaces; tabs, controls
# and other spaces than " " are not printable, so they go through the console too
_EMOJI_CODE = re.compile(r":\S*?:")


def narrate(line: str) -> None:
    """One plain line of narration on stderr ("wrote ...", a note), as ``stderr().print(line,
    markup=False)`` prints it; -q silences it.

    A line Rich would print as it is (printable, no emoji code) is written without making a
    console, so a run whose only narration it is (`check --format json --html`) does not
    import Rich for it (about 35 ms); a property test holds the two outputs equal.
    """
    if run_state["quiet"]:
        return
    if line.isprintable() and not _EMOJI_CODE.search(line) and sys.stderr is not None:
        sys.stderr.write(line + "\n")
        return
    stderr().print(line, markup=False)


def stderr(errors: bool = False) -> Console:
    """The console for narration (warnings, progress, "wrote ..."); -q silences all but errors."""
    from memdiag.render.literal import LiteralConsole

    quiet = bool(run_state["quiet"]) and not errors
    return LiteralConsole(stderr=True, highlight=False, soft_wrap=True, quiet=quiet)


def quiet_mode(quiet: bool) -> None:
    """-q/--quiet given to the command (or before it)."""
    run_state["quiet"] = bool(run_state["quiet"] or quiet)


@contextmanager
def progress(label: str, min_total: int) -> Iterator[Callable[[int, int], None] | None]:
    """A (done, total) progress bar on stderr, shown once a run has ``min_total`` steps, on a
    terminal only (None otherwise)."""
    with progress_stages((label, min_total)) as (tick,):
        yield tick


@contextmanager
def progress_stages(
    *stages: tuple[str, int],
) -> Iterator[tuple[Callable[[int, int], None] | None, ...]]:
    """One (done, total) bar per (label, min_total) stage, run one after another: a stage's bar
    shows once its total reaches ``min_total`` and goes when it is done. On stderr, on a
    terminal only (each tick None otherwise)."""
    if run_state["quiet"] or not sys.stderr.isatty():
        yield tuple(None for _ in stages)
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

        def ticker(label: str, min_total: int, last: bool) -> Callable[[int, int], None]:
            task = bar.add_task(label, total=None, visible=False)
            drawn = -1

            def tick(done: int, total: int) -> None:
                nonlocal drawn
                # a few hundred redraws at most, however long the run and whatever the steps
                if total >= min_total and (done - drawn >= max(1, total // 200) or done == total):
                    drawn = done
                    shown = done < total or last  # a finished stage makes way for the next
                    bar.update(task, completed=done, total=total, visible=shown, refresh=True)

            return tick

        yield tuple(
            ticker(label, min_total, k == len(stages) - 1)
            for k, (label, min_total) in enumerate(stages)
        )


@contextmanager
def download_progress(label: str) -> Iterator[Callable[[int, int | None], None]]:
    """One line saying what is fetched from where, then a (bytes, total) download bar on stderr
    when it is a terminal (a long URL stays on its own line, never squeezing the bar out)."""
    narrate(f"downloading {label}")
    if run_state["quiet"] or not sys.stderr.isatty():
        yield lambda _done, _total: None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=stderr(),
        transient=True,
    ) as bar:
        task = bar.add_task("download", total=None)

        def tick(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        yield tick


def store_problems(store: ChromaStore | None) -> None:
    """One warning line per collection with records memdiag could not read (read the rest)."""
    if store is None:
        return
    from rich.markup import escape

    err = stderr()
    for line in store.problems():
        err.print(f"[yellow]warning:[/] {escape(line)}", markup=True, highlight=False)


def load_transcript(path: Path, how: InputFlags) -> Transcript:
    """Read a transcript as the input flags say; warnings and skipped lines go to stderr."""
    from memdiag.errors import UsageError
    from memdiag.transcript import load
    from memdiag.transcript.formats.base import Selection

    if how.session is not None and how.conversation is not None:
        raise UsageError("give --session (an SDK database) or --conversation (an export), not both")
    select = how.session if how.session is not None else how.conversation
    selection = Selection(conversation=select, agent=how.agent)
    transcript = load(
        path,
        how.input_format,
        skip_invalid=how.skip_invalid,
        selection=selection,
        system=system_prompt(how.system),
    )
    if not (transcript.warnings or transcript.notes or transcript.skipped):
        return transcript  # nothing to say: no console made, Rich's not imported (JSON runs)
    err = stderr()
    from memdiag.render.literal import literal

    for w in transcript.warnings[:20]:  # they quote the input: literal text, clipped
        err.print(f"[yellow]warning:[/] {literal(clip(w, 300))}", highlight=False)
    for n in transcript.notes:
        err.print(f"[cyan]note:[/] {literal(n)}", highlight=False)
    if transcript.skipped:
        from memdiag.render.words import plural

        err.print(f"[yellow]skipped {plural(transcript.skipped, 'invalid line')}[/]")
    return transcript


def system_prompt(value: str | None) -> str | None:
    """--system TEXT, or @FILE: the file's text (UTF-8)."""
    if value is None or not value.startswith("@"):
        return value
    from memdiag.errors import InputError
    from memdiag.fileio import read_text

    name = value[1:]
    text = read_text(name, 16 * 1024**2, "system prompt")
    if not text.strip():
        raise InputError("--system: the file is empty", path=name)
    return text


def fail_on_choices(value: str | None, choices: tuple[str, ...], what: str) -> list[str]:
    """The comma-separated --fail-on values, each one of ``choices``."""
    from memdiag.errors import UsageError

    chosen = [x.strip() for x in value.split(",") if x.strip()] if value else []
    bad = [x for x in chosen if x not in choices]
    if bad:
        raise UsageError(f"--fail-on: unknown {what} {bad[0]!r}; choose from {', '.join(choices)}")
    return chosen


def html_target(path: Path | None) -> Path | None:
    """Refuse an --html path that cannot take a file before any work is done."""
    return output_target(path)


def output_target(path: Path | None) -> Path | None:
    """Refuse an output path (--html, --junit, -o) that cannot take a file before any work is
    done: a folder, a device, `FILE/x`, a read-only place (exit 2)."""
    if path is not None:
        from memdiag.fileio import check_output_path

        check_output_path(path)
    return path


def write_html(path: Path, doc: dict[str, Any]) -> None:
    """Write the interactive report (one self-contained page) and say where."""
    from memdiag.render.report import write_report

    write_report(str(path), doc)
    narrate(f"wrote HTML report to {path}")


def exit_now(code: int) -> NoReturn:
    """End the process with ``code``, skipping the interpreter's teardown when that is safe.

    At exit Python frees every object one by one: the encoding's 200,000-entry tables on both
    sides of tiktoken, the transcript, the modules. For a small run that is a sixth of its
    time, spent on memory the OS takes back at once anyway. So, as mypy does (its --fast-exit,
    on by default), the process ends with ``os._exit`` once everything an exit owes is done:
    the atexit handlers run (coverage, multiprocessing, logging), then stdout and stderr are
    flushed. Only from a process running one thread, native ones included (a library thread
    may still be writing), but for the idle pools numpy and onnxruntime start at import
    (``memdiag.threads``), and not in Python's development mode; otherwise, or if a flush
    fails for another reason than a closed pipe, the normal exit. A reader that went away
    before the last of the output (``| head -c 1``) is no error, as inside the command: the
    command's own code, nothing on stderr (the normal exit would end 120). Under a
    profiler, tracer or debugger (``python -m cProfile``, coverage, pdb) too: they write what
    they found after the program returns.
    """
    import atexit
    import threading

    from memdiag.threads import other_threads

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)  # CPython's, as Py_Finalize runs
    if (
        run_exitfuncs is None
        or sys.flags.dev_mode
        or sys.getprofile() is not None
        or sys.gettrace() is not None
        or threading.active_count() != 1
        or other_threads() not in (None, 0)
    ):
        _flushed()  # a closed pipe ends with the command's code here too, not 120
        sys.exit(code)
    run_exitfuncs()
    if not _flushed():
        sys.exit(code)
    os._exit(code)


def _flushed() -> bool:
    """Flush stdout and stderr. A reader that went away before the last of the output
    (``| head -c 1``) is no error, as inside the command: what is left goes nowhere."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        return False
    return True
