"""The Format protocol that every input format module follows (SPEC §2).

A format is a module with a ``name``, ``detect(source)`` (does the parsed file look like this
format?) and ``read(source, skip_invalid)`` (yield raw items). Format modules import only this
module, :mod:`memdiag.transcript.source` and :mod:`memdiag.transcript.model`; the registry in
``formats/__init__.py`` imports them, never the other way round.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from memdiag.transcript.model import RawItem
from memdiag.transcript.source import Source


class Format(Protocol):
    @property
    def name(self) -> str: ...

    def detect(self, source: Source) -> bool: ...

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]: ...


class SelectingFormat(Format, Protocol):
    """A format whose files hold several conversations (chat exports): ``read`` takes the
    chosen one (``select``: id, title or ``all``) and raises ChoiceNeeded without one."""

    @property
    def select_flag(self) -> str: ...

    def read(
        self, source: Source, skip_invalid: bool, select: str | None = None
    ) -> Iterator[RawItem]: ...


class PathFormat(Format, Protocol):
    """A format read from the file itself, not parsed JSON (an SQLite database)."""

    def detect_path(self, path: str | Path) -> bool: ...

    def read_path(
        self, path: str | Path, skip_invalid: bool, select: str | None
    ) -> tuple[Source, list[RawItem]]: ...
