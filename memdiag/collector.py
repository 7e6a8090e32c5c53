"""Python's cyclic garbage collector: paused around work that only makes long-lived objects,
and run less often by the `memdiag` command."""

from __future__ import annotations

import gc
import platform
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collections_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while many long-lived objects are made (the
    encoding's ranks in ``memdiag.tokens``, a transcript as it is loaded, a replay's units
    and state in ``memdiag.replay``): its collections would walk them all and find no
    garbage. It runs again, as before, afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def collect_less_often() -> None:
    """For the `memdiag` process (``memdiag.cli.main``), not for a library's caller (the pytest
    plugin, a test): a pass over the young generation every 200,000 new objects instead of
    700, and over the older ones every 30 of those instead of 10, as mypy runs (its
    ``tune_gc``).

    Almost every object a run makes lives to its end (the transcript, its counts and index,
    the replays' records, a report's document) or is freed by its reference count, so the
    collector's passes walk them and find no garbage; ``collections_paused`` keeps only the
    load and ``replay.run`` out of them. Side by side as processes on the 50,000-message bench
    transcript: a one-fact `diagnose` 11% less CPU, `replay --strategy all` 6%, the same peak
    memory (`benchmarks/bench_replay.py --cli` prints it). Cyclic garbage waits longer to be
    freed; a run makes little of it.
    """
    if platform.python_implementation() == "CPython":
        gc.set_threshold(200_000, 30, 30)
