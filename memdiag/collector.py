"""Pausing Python's cyclic garbage collector around work that only makes long-lived objects."""

from __future__ import annotations

import gc
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
