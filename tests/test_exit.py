"""How the `memdiag` command ends (memdiag.cli.runtime.exit_now): a finished single-threaded
run skips the interpreter's teardown, yet its output, exit code and atexit handlers are those
of a normal exit; with another thread alive it exits normally (the thread is waited for)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT

# runs `memdiag ARGS...` through main(), recording whether os._exit ended it
SCRIPT = """
import atexit, os, sys, threading, time
marks = sys.argv.pop(1)
def mark(what):
    with open(marks, "a") as f:
        f.write(what + "\\n")
atexit.register(mark, "atexit")
real_exit = os._exit
def fast(code):
    mark(f"os._exit {code}")
    real_exit(code)
os._exit = fast
ended = threading.Event()
if sys.argv[1] == "--thread":
    sys.argv.pop(1)
    def late():  # alive until main() has returned or raised, however long the run takes
        ended.wait(120)
        mark("thread finished")
    threading.Thread(target=late).start()
if sys.argv[1] == "--pools":  # the model's libraries, imported as a diagnose imports them
    sys.argv.pop(1)
    from memdiag.threads import watch_pools
    watch_pools()
    import numpy, onnxruntime
if sys.argv[1] == "--numpy-first":  # imported before memdiag could watch it
    sys.argv.pop(1)
    import numpy
from memdiag.cli import main
sys.argv[0] = "memdiag"
try:
    main()  # os._exit ends the process in here: the thread then never finishes
finally:
    ended.set()
"""


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    marks = tmp_path / "marks.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMDIAG_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONDEVMODE", None)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(marks), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    lines = marks.read_text().splitlines() if marks.exists() else []
    return proc, lines


def test_a_finished_run_ends_at_once_with_its_whole_output_and_atexit(tmp_path: Path) -> None:
    proc, marks = _run(tmp_path, "replay", str(FIXTURES / "allergy.jsonl"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # all of it was flushed
    assert doc["transcript"].endswith("allergy.jsonl")
    assert marks == ["atexit", "os._exit 0"]  # the handlers ran first, once


def test_the_exit_code_of_a_refused_input_is_kept(tmp_path: Path) -> None:
    proc, marks = _run(tmp_path, "replay", str(tmp_path / "missing.jsonl"))
    assert proc.returncode == 2
    assert "no such file" in proc.stderr  # stderr flushed before the end
    assert marks == ["atexit", "os._exit 2"]


def test_a_usage_error_from_typer_keeps_its_code(tmp_path: Path) -> None:
    proc, marks = _run(tmp_path, "replay", "--no-such-flag")
    assert proc.returncode == 2
    assert "No such option" in proc.stderr
    assert marks[-1] == "os._exit 2"


def test_with_another_thread_alive_the_exit_is_the_normal_one(tmp_path: Path) -> None:
    proc, marks = _run(tmp_path, "--thread", "replay", str(FIXTURES / "allergy.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert "thread finished" in marks  # a normal exit waits for a non-daemon thread
    assert not any(m.startswith("os._exit") for m in marks)
    assert marks.count("atexit") == 1


def test_the_idle_pools_of_numpy_and_onnxruntime_do_not_keep_the_fast_exit_away(
    tmp_path: Path,
) -> None:
    """A run that loaded the embedding model's libraries has their worker threads alive at
    exit (OpenBLAS's, onnxruntime's): they only compute for a caller, so the run still ends
    at once; a thread started by an import memdiag did not watch still counts."""
    args = ("replay", str(FIXTURES / "allergy.jsonl"), "--format", "json")
    proc, marks = _run(tmp_path, "--pools", *args)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["transcript"].endswith("allergy.jsonl")
    assert marks == ["atexit", "os._exit 0"]
    (tmp_path / "first").mkdir()
    proc, marks = _run(tmp_path / "first", "--numpy-first", *args)
    assert proc.returncode == 0, proc.stderr
    assert marks == ["atexit"]  # the normal exit: numpy's thread was not seen starting


def test_pool_threads_are_those_the_watched_imports_started() -> None:
    code = (
        "from memdiag import threads as t\n"
        "t.watch_pools()\n"
        "import numpy, onnxruntime, threading, time\n"
        "print(t.os_threads(), len(t._pools), t.other_threads())\n"
        "x = threading.Thread(target=time.sleep, args=(0.5,)); x.start()\n"
        "print(t.other_threads())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    total, pools, others, with_thread = map(int, out)
    assert pools >= 1 and total == pools + 1 and others == 0
    assert with_thread == 1


@pytest.mark.parametrize(("messages", "read"), [(0, 1), (0, 0), (3000, 1)])
def test_a_closed_pipe_exits_as_before(tmp_path: Path, messages: int, read: int) -> None:
    """`memdiag replay x | head -c 1`: the command's own code, nothing on stderr, whether the
    reader leaves while the command writes (a long output) or before the last flush at exit
    (a short one, buffered until then; the normal exit ended 120 there)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMDIAG_CACHE_DIR": str(tmp_path / "cache")}
    source = FIXTURES / "allergy.jsonl"
    if messages:
        source = tmp_path / "long.jsonl"
        lines = [
            json.dumps({"role": "user" if k % 2 == 0 else "assistant", "content": f"message {k}"})
            for k in range(messages)
        ]
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "memdiag", "replay", str(source)]
    proc = subprocess.Popen(
        [*cmd, "--format", "json", "--show", "all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(read)  # 0: the reader is gone before the command writes a byte
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_under_a_profiler_the_exit_is_the_normal_one(tmp_path: Path) -> None:
    """`python -m cProfile -o FILE -m memdiag ...` writes FILE after the program returns."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMDIAG_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "replay.prof"
    cmd = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "memdiag", "replay"]
    proc = subprocess.run([*cmd, str(FIXTURES / "allergy.jsonl")], env=env, cwd=ROOT)
    assert proc.returncode == 0
    assert out.stat().st_size > 0


def test_output_left_for_a_reader_that_went_away_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last flush meets a closed pipe (what a short `| head -c 1` run meets at exit): no
    error, and the buffered rest goes nowhere, so the interpreter's own flush cannot fail."""
    import io

    from memdiag.cli.runtime import _flushed

    read_end, write_end = os.pipe()
    out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(write_end, "w")), encoding="utf-8")
    out.write("x" * 100)  # buffered, not yet written
    os.close(read_end)
    monkeypatch.setattr(sys, "stdout", out)
    assert _flushed()
    out.write("more")
    out.flush()  # the descriptor is now /dev/null: nothing raises
    assert os.path.samefile(f"/proc/self/fd/{write_end}", os.devnull)
    out.close()


def test_the_command_collects_less_often_and_importing_memdiag_does_not(tmp_path: Path) -> None:
    """memdiag.collector.collect_less_often: the `memdiag` process's thresholds, never those of
    a program that imports memdiag (the pytest plugin, a test)."""
    code = (
        "import atexit, gc, sys\n"
        "import memdiag.cli, memdiag.replay, memdiag.transcript\n"
        "print('imported', gc.get_threshold())\n"
        "atexit.register(lambda: print('ran', gc.get_threshold()))\n"
        "sys.argv = ['memdiag', 'replay', sys.argv[1], '--format', 'json']\n"
        "memdiag.cli.main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMDIAG_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(FIXTURES / "allergy.jsonl")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    fresh = [sys.executable, "-c", "import gc; print(gc.get_threshold())"]
    default = subprocess.run(fresh, capture_output=True, text=True).stdout.strip()
    assert lines[0] == f"imported {default}"
    assert lines[-1] == "ran (200000, 30, 30)"
