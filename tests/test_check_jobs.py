"""`check --jobs`: workers are forked from a warmed-up parent when that is safe, else spawned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memdiag.checks import load_spec
from memdiag.checks import run as run_mod
from memdiag.threads import os_threads
from tests.conftest import FIXTURES, ROOT

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="fork is used on Linux only"
)

# runs in a fresh interpreter, so no thread of another test can be alive
SCRIPT = """
import json, sys
import memdiag.checks.run as r
from memdiag.checks.spec import load_spec
seen = []
real = r._worker_context
r._worker_context = lambda spec: seen.append(real(spec).get_start_method()) or real(spec)
spec = load_spec(sys.argv[1])
# --jobs 2 first: the serial run embeds texts in this process (onnxruntime threads), after
# which forking is no longer safe and spawn is chosen
two = r.run_checks(spec, jobs=2)
one = r.run_checks(spec, jobs=1)
key = lambda rep: [(c.name, c.passed, c.failures, c.failure_lines) for c in rep.cases]
print(json.dumps({"methods": seen, "same": key(one) == key(two), "passed": two.passed}))
"""


def test_single_threaded_parent_forks_and_results_match(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(FIXTURES / "checks.yaml")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["methods"][0] == "fork"
    assert doc["same"] is True
    assert doc["passed"] == len(load_spec(FIXTURES / "checks.yaml").cases)


def test_another_thread_means_spawn() -> None:
    spec = load_spec(FIXTURES / "checks.yaml")
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        assert run_mod._worker_context(spec).get_start_method() == "spawn"
    finally:
        stop.set()
        worker.join()


def test_native_threads_count_too() -> None:
    """A thread threading does not know of (chromadb's, onnxruntime's) still means spawn."""
    import ctypes

    before = os_threads()
    assert before is not None and before >= 1
    tasks = set(os.listdir("/proc/self/task"))  # threads a test before this one left may exit
    # a thread started below the threading module, as a native library does: it runs libc's
    # pause() (a cancellation point), no Python code
    libc = ctypes.CDLL(None)
    pthread_t = ctypes.c_ulong()
    routine = ctypes.cast(libc.pause, ctypes.c_void_p)
    assert libc.pthread_create(ctypes.byref(pthread_t), None, routine, None) == 0
    try:
        assert set(os.listdir("/proc/self/task")) - tasks  # the native thread is one of them
        assert (os_threads() or 0) >= 2
        spec = load_spec(FIXTURES / "checks.yaml")
        assert run_mod._worker_context(spec).get_start_method() == "spawn"
    finally:
        libc.pthread_cancel(pthread_t)
        libc.pthread_join(pthread_t, None)


def test_warm_up_loads_the_encodings_and_starts_no_thread() -> None:
    from memdiag.tokens import get_encoding

    spec = load_spec(FIXTURES / "checks.yaml")
    before = threading.active_count()
    get_encoding.cache_clear()
    run_mod._warm_up(spec)
    assert get_encoding.cache_info().currsize >= 1  # the cases' encoding is loaded
    assert threading.active_count() == before


REPORT_SCRIPT = """
import json, sys
import memdiag.checks.run as r
from memdiag.checks.run import check
from memdiag.config import Settings
from memdiag.render.report.checks import check_document
spec = sys.argv[1]
r.KEPT_MESSAGES = int(sys.argv[2])
two = check(spec, Settings(), jobs=2, keep_contexts=True)
plain = check(spec, Settings())
same = check_document(spec, Settings(), two) == check_document(spec, Settings(), plain)
print(json.dumps({
    "contexts": sum(c.context is not None for c in two.cases),
    "replays": sum(len(c.replays) for c in two.cases),
    "cases": len(two.cases),
    "same": same,
}))
"""


@pytest.mark.parametrize("bound", [200_000, 1])
def test_workers_send_their_contexts_back_for_the_report(tmp_path: Path, bound: int) -> None:
    """check --jobs 2 --html: the workers' contexts and replays come back (pickled without the
    encoding), up to KEPT_MESSAGES messages in all (past it the parent drops them and the
    report reads the file again), and the report is the one built from nothing."""
    import shutil

    import yaml

    for name in ("demo.jsonl", "allergy_zh.jsonl"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    cases = [
        {
            "name": f"{name} {strategy}",
            "transcript": name,
            "strategy": {"name": strategy, "budget": 200},
            "expect": [{"kept": "allergic to peanuts"}, {"lost": "花生过敏", "at_turn": 2}],
        }
        for name in ("demo.jsonl", "allergy_zh.jsonl")
        for strategy in ("sliding_window", "summary", "scratchpad")
    ]
    spec = tmp_path / "checks.yaml"
    spec.write_text(yaml.safe_dump({"version": 1, "cases": cases}, allow_unicode=True), "utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT), MEMDIAG_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run(
        [sys.executable, "-c", REPORT_SCRIPT, str(spec), str(bound)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    kept = 6 if bound > 1 else 1  # the first context takes the whole room of 1
    assert doc == {"contexts": kept, "replays": kept, "cases": 6, "same": True}
