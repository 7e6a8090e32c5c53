"""The threads of this process as the operating system counts them.

Not ``threading.active_count()``: chromadb's and onnxruntime's native threads are invisible to
it. Two places need the real count: `check --jobs` forks workers only from a single-threaded
parent (a child forked while another thread holds a lock hangs on it), and the CLI skips the
interpreter's teardown at exit only when no other thread could still be running.
"""

from __future__ import annotations

import os
import sys


def os_threads() -> int | None:
    """Threads of this process as Linux counts them (None elsewhere, or when unreadable)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None
