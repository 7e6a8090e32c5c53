"""The Format protocol that every input format module follows (docs/adding-a-format.md).

A format is a module with a ``name`` (the module's own name), ``detect(source)`` (does the
parsed file look like this format?), ``read(source, skip_invalid)`` (yield raw items, refusing
bad records with :func:`memdiag.transcript.toolkit.reject`), ``detect_priority`` (its place in
auto-detection: lower is asked first) and ``examples`` (fixture files it reads, relative to the
repository's ``fixtures/``). The registry in ``formats/__init__.py`` finds the modules by listing
the package and imports them; a format module never imports the registry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from memdiag.transcript.model import RawItem
from memdiag.transcript.source import Source


class Format(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def detect_priority(self) -> int: ...

    @property
    def examples(self) -> tuple[str, ...]: ...

    def detect(self, source: Source) -> bool: ...

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]: ...


@dataclass(frozen=True, slots=True)
class Selection:
    """What the user chose among the things a file holds, one field per kind of choice: an id
    or title, ``all`` (every one), or None (not chosen: a reader that holds several raises
    ChoiceNeeded, which lists them).

    A reader names the choices it takes in ``selects`` (choice → the flag it is set with);
    :func:`memdiag.transcript.formats.load` refuses a choice that the file's reader does not
    take, and passes the whole selection to the readers that take any.
    """

    conversation: str | None = None  # a conversation of an export, a session of a database
    agent: str | None = None  # an agent whose calls a trace records, a Claude Code subagent

    def given(self) -> tuple[str, ...]:
        """The choices that were made, by field name."""
        return tuple(f for f in ("conversation", "agent") if getattr(self, f) is not None)


# each choice: the flags that set it, and what it chooses among (for the error when a file's
# reader does not take it)
CHOICES = {
    "conversation": (
        "--session/--conversation",
        "the conversations of an export or an Agents SDK database",
    ),
    "agent": ("--agent", "the agents whose calls a trace records, or of a Claude Code session"),
}
NO_SELECTION = Selection()


class SelectingFormat(Format, Protocol):
    """A format whose files hold several things to choose among (the conversations of a chat
    export, the sessions of a database, the agents of a trace): ``selects`` maps each choice it
    takes (a field of :class:`Selection`) to its flag (``{"conversation": "--conversation"}``),
    and ``read`` gets the selection."""

    @property
    def selects(self) -> Mapping[str, str]: ...

    def read(
        self, source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
    ) -> Iterator[RawItem]: ...


class PathFormat(Format, Protocol):
    """A format read from the file itself, not parsed JSON (an SQLite database); it declares
    ``selects`` as a SelectingFormat does (``{}`` when it takes no choice)."""

    @property
    def selects(self) -> Mapping[str, str]: ...

    def detect_path(self, path: str | Path) -> bool: ...

    def read_path(
        self, path: str | Path, skip_invalid: bool, selection: Selection
    ) -> tuple[Source, list[RawItem]]: ...
