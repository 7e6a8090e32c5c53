"""The one error hierarchy of memdiag; the CLI maps each class to an exit code."""

from __future__ import annotations

SHOWN_CHARS = 80  # how much of an input value an error message quotes
MAX_MESSAGE = 600  # a whole error line, path included: input quoted whole never floods a log


def clip(value: object, limit: int = SHOWN_CHARS) -> str:
    """Short form of input text for an error line: one line, at most ``limit`` characters and
    a count of the rest."""
    text = " ".join(str(value).split())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


class MemdiagError(Exception):
    """Base class for expected failures: one clear line, no traceback.

    ``str()`` is one line of at most MAX_MESSAGE characters, whatever a message quotes (an
    error that lists choices keeps its few lines, each clipped).
    """

    exit_code = 3
    listing = False  # True: a head line and a short list below it, each line clipped

    def __str__(self) -> str:
        text = super().__str__()
        if self.listing:
            return "\n".join(
                line if len(line) <= MAX_MESSAGE else line[:MAX_MESSAGE] + "…"
                for line in text.splitlines()
            )
        return clip(text, MAX_MESSAGE)


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
