"""The one error hierarchy of memdiag; the CLI maps each class to an exit code."""

from __future__ import annotations


class MemdiagError(Exception):
    """Base class for expected failures: one clear line, no traceback."""

    exit_code = 3


class InputError(MemdiagError):
    """Bad input (transcript, store, spec, config): exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        prefix = ""
        if path is not None:
            prefix = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(prefix + message)
        self.message = message


class UsageError(MemdiagError):
    """Flags that contradict each other or name unknown things: exit code 2."""

    exit_code = 2


class StoreError(InputError):
    """A long-term store that cannot be read (not a Chroma store, bad facts file): exit 2."""


class UnavailableError(MemdiagError):
    """A configured service (LLM endpoint, Chroma server) is unreachable: exit 2."""

    exit_code = 2
