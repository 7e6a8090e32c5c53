"""Running memdiag on a fuzzed input and checking what every run must guarantee.

Every run asserts: exit code in {0, 1, 2}; no traceback and no "internal error" in the output;
an error is one line (``memdiag: ...``) of bounded length; the working folder, which holds
every input, is byte-identical afterwards (nothing written on error; outputs only where asked,
only on success). Runs happen in-process (Typer's CliRunner) in a fresh folder that is also the
current directory, so a stray ``./memdiag.yaml`` or a relative write would show.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
LONG = os.environ.get("MEMDIAG_FUZZ", "quick") == "long"
SCALE = float(os.environ.get("MEMDIAG_FUZZ_SCALE", "1"))  # long counts × this (a shorter try)
MAX_ERROR_LINE = 1000  # an error quotes input through fileio.clip: never the 21 MB line of old


def fuzz_settings(quick: int, long: int) -> Any:
    """Hypothesis settings for one target: ``quick`` examples normally, ``long`` under
    MEMDIAG_FUZZ=long. Quick runs are derandomized so that CI is reproducible."""
    return settings(
        max_examples=max(1, round(long * SCALE)) if LONG else quick,
        derandomize=not LONG,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@dataclass
class Stats:
    inputs: Counter[str] = field(default_factory=Counter)
    exits: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    tracebacks: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "profile": "long" if LONG else "quick",
            "inputs_total": sum(self.inputs.values()),
            "inputs": dict(self.inputs),
            "exit_codes": {k: {str(c): n for c, n in v.items()} for k, v in self.exits.items()},
            "tracebacks": len(self.tracebacks),
            "traceback_examples": self.tracebacks[:20],
        }


STATS = Stats()


def digest(folder: Path) -> dict[str, str]:
    """sha256 of every file below ``folder`` (symlinks by target text, not followed)."""
    out: dict[str, str] = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[rel + "/"] = "dir"
    return out


@contextlib.contextmanager
def cwd(folder: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(old)


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def check_outcome(
    kind: str,
    argv: Sequence[str],
    code: int,
    stdout: str,
    stderr: str,
    crash: str | None,
    before: dict[str, str],
    after: dict[str, str],
    outputs: Sequence[str],
) -> None:
    STATS.inputs[kind] += 1
    STATS.exits[kind][code] += 1
    shown = " ".join(a if len(a) < 120 else a[:117] + "..." for a in argv)
    internal = crash or (
        code == 3
        or "Traceback (most recent call last)" in stdout + stderr
        or "internal error" in stderr
    )
    if internal:
        STATS.tracebacks.append(f"{kind}: memdiag {shown}: {(crash or stderr)[-300:]}")
    assert crash is None, f"memdiag {shown} raised {crash}"
    assert code in (0, 1, 2), f"memdiag {shown} exited {code}: {stderr[-2000:]}"
    assert "Traceback (most recent call last)" not in stdout + stderr, stderr[-2000:]
    assert "internal error" not in stderr, stderr[-2000:]
    assert "panicked at" not in stderr, stderr[-2000:]  # a Rust panic's message and backtrace
    usage = code == 2 and stderr.startswith("Usage: ")
    if usage:  # a flag Typer itself refused: its boxed message, which quotes only argv
        assert len(stderr) <= 3000 + 3 * max(map(len, argv), default=0), stderr[:2000]
    elif code == 2:
        errors = [ln for ln in stderr.splitlines() if ln.startswith("memdiag:")]
        assert len(errors) == 1, f"memdiag {shown}: not one error line: {stderr[-2000:]!r}"
        assert len(errors[0]) <= MAX_ERROR_LINE, f"error line of {len(errors[0])} chars"
    allowed: set[str] = set()
    if code in (0, 1):  # an output and the folders made for it
        for o in outputs:
            parts = Path(o).parts
            allowed.update(str(Path(*parts[: k + 1])) for k in range(len(parts)))
    changed = {k for k in before if after.get(k) != before[k] and k not in allowed}
    assert not changed, f"memdiag {shown} (exit {code}) changed inputs: {sorted(changed)}"
    added = set(after) - set(before)
    stray = {a for a in added if a.rstrip("/") not in allowed}
    assert not stray, f"memdiag {shown} (exit {code}) wrote {sorted(stray)}"


def run_cli(kind: str, argv: Sequence[str], folder: Path, outputs: Sequence[str] = ()) -> Outcome:
    """memdiag ``argv`` in-process with ``folder`` as the current directory, checked."""
    from typer.testing import CliRunner

    from memdiag.cli import app

    before = digest(folder)
    with cwd(folder):
        result = CliRunner().invoke(app, list(argv), catch_exceptions=True)
    exc = result.exception
    crash = None
    if exc is not None and not isinstance(exc, SystemExit):
        import traceback

        crash = "".join(traceback.format_exception(exc))[-3000:]
    check_outcome(
        kind,
        argv,
        result.exit_code,
        result.stdout,
        result.stderr,
        crash,
        before,
        digest(folder),
        outputs,
    )
    return Outcome(result.exit_code, result.stdout, result.stderr)


def run_process(
    kind: str, argv: Sequence[str], folder: Path, outputs: Sequence[str] = (), timeout: int = 300
) -> Outcome:
    """memdiag ``argv`` in a fresh interpreter (for stores: a crash in native code would take
    pytest down with it), checked like :func:`run_cli`."""
    tmp = folder / ".tmp"  # memdiag's temporary store copies go here and must be gone after
    tmp.mkdir(exist_ok=True)
    before = digest(folder)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANONYMIZED_TELEMETRY": "False"}
    env["TMPDIR"] = str(tmp)
    proc = subprocess.run(
        [sys.executable, "-m", "memdiag", *argv],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    crash = None if proc.returncode >= 0 else f"killed by signal {-proc.returncode}"
    check_outcome(
        kind,
        argv,
        proc.returncode,
        proc.stdout,
        proc.stderr,
        crash,
        before,
        digest(folder),
        outputs,
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr)
