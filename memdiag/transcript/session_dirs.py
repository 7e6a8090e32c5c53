"""A directory of coding-agent sessions (docs/coding-agents.md): `~/.claude/projects/<project>/`,
`~/.codex/sessions/`. Its sessions are listed newest first; `--session ID` (or `all`) reads them.

Shared by the Claude Code and Codex readers, which say how to find and read one session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from memdiag.errors import InputError
from memdiag.transcript.events import Extra, RawWindow
from memdiag.transcript.model import RawItem, RawMessage, RawSummary
from memdiag.transcript.source import Choice, Source, choose, json_loads, read_source

HEAD_BYTES = 1 << 20  # what detection reads of a file: its first lines, never a whole big file


def session_choice(
    f: Path, marker: bytes, title_of: Callable[[dict[str, object]], str | None]
) -> Choice:
    """One session file as a listed choice: its line count, its time (the file's), and as its
    title the first text ``title_of`` finds in a line holding ``marker`` (the user's first
    words); a file that cannot be read is listed all the same (reading it says why)."""
    import datetime as dt

    lines, title = 0, ""
    try:
        with f.open("rb") as fp:
            for raw in fp:
                lines += 1
                if not title and marker in raw:
                    try:
                        obj = json_loads(raw.decode("utf-8", "replace"))
                    except ValueError:
                        continue
                    text = title_of(obj) if isinstance(obj, dict) else None
                    if text:
                        title = " ".join(text.split())[:60]
        ts = dt.datetime.fromtimestamp(f.stat().st_mtime, tz=dt.timezone.utc)
    except OSError:
        return Choice(f.stem, "", lines, None, unit="line")
    return Choice(f.stem, title, lines, ts.isoformat(timespec="seconds"), unit="line")


def head_records(f: Path, lines: int = 50) -> list[object]:
    """The JSON values of the first ``lines`` lines of ``f`` (at most HEAD_BYTES read; lines
    that are not JSON are left out)."""
    from memdiag.fileio import json_loads

    try:
        with f.open("rb") as fp:
            head = fp.read(HEAD_BYTES)
    except OSError:
        return []
    out: list[object] = []
    for raw in head.splitlines()[:lines]:
        try:
            out.append(json_loads(raw.decode("utf-8", "replace")))
        except ValueError:  # not JSON, or beyond the limits (json_loads raises LimitError)
            continue
    return out


def kept_requests(
    requests: list[tuple[int, bool, RawWindow]], before_compaction: bool = False
) -> list[RawWindow]:
    """The observed windows worth keeping of a session's requests ``(turn, after_compaction,
    window)``: the first and the last request of each turn (the window the turn started with,
    and the one that produced its final reply) and the first request after each compaction
    (with ``before_compaction``, the last one before it too: the window it replaced, when a
    compaction falls inside a turn).

    A coding agent makes tens of requests per turn (each tool call is one), and each window
    lists every message in it: keeping them all would make a long session's transcript
    quadratic in size. Their reported prompt sizes are kept on the windows kept.
    """
    keep: set[int] = set()
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for k, (turn, after, _) in enumerate(requests):
        first.setdefault(turn, k)
        last[turn] = k
        if after:
            keep.add(k)
            if before_compaction and k:
                keep.add(k - 1)
    keep.update(first.values())
    keep.update(last.values())
    return [w for k, (_, _, w) in enumerate(requests) if k in keep]


def suffix_ids(items: list[RawItem], suffix: str) -> list[RawItem]:
    """The items of one session with every message id (and every reference to one) suffixed:
    sessions read together (`--session all`) may share uuids (a resumed or copied session)."""
    for it in items:
        if isinstance(it, RawMessage) and it.id is not None:
            it.id += suffix
        elif isinstance(it, RawSummary) and it.replaces_through is not None:
            it.replaces_through += suffix
        elif isinstance(it, RawWindow):
            it.before += suffix
            it.ids = tuple(i + suffix for i in it.ids)
            it.extra = tuple(
                Extra(e.section, e.content, tuple(c + suffix for c in e.covers), e.opaque, e.tokens)
                for e in it.extra
            )
    return items


def read_sessions(
    path: str | Path,
    sessions: Callable[[Path], list[Path]],
    choice: Callable[[Path], Choice],
    what: str,
    select: str | None,
    read_one: Callable[[Source], Iterable[RawItem]],
    skip_invalid: bool,
) -> tuple[Source, list[RawItem]]:
    """One session file, or the chosen sessions of a directory (``sessions(dir)``: its files,
    newest first), each its own session; the error lists them when none is chosen."""
    directory = Path(path)
    if not directory.is_dir():
        single = read_source(path, skip_invalid)
        return single, list(read_one(single))
    files = sessions(directory)
    if not files:
        raise InputError(f"no {what}s in this directory", path=str(path))
    picked = choose(str(path), what, "--session", [choice(f) for f in files], select)
    items: list[RawItem] = []
    source: Source | None = None
    for k in reversed(picked):  # `all`: oldest first
        one = read_source(files[k], skip_invalid)
        part = list(read_one(one))
        items.extend(suffix_ids(part, f"@{files[k].stem}") if len(picked) > 1 else part)
        if source is None:
            source = one
        else:
            source.skipped += one.skipped
            source.warnings.extend(one.warnings)
    assert source is not None
    if len(picked) > 1:
        source.path = str(path)
    return source, items
