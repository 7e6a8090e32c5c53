"""The JSON facts file: the exact key-value profile layer (docs/reference.md#stores).

Three shapes are accepted:

- the seed's flat object ``{"name": "Mia", "allergy": "peanuts"}``;
- nested objects, flattened to dotted keys (``{"user": {"name": "Mia"}}`` → ``user.name``);
- a list of records ``[{"key", "value", "updated_at"?, "source"?}, ...]``; several records with
  the same key are that key's history, and the latest one is current.

Reading is strict: a file that is not UTF-8 JSON of one of these shapes raises ``StoreError``
with the position (``path:line:col``) or the key at fault, never a traceback.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memdiag.errors import InputError, StoreError
from memdiag.fileio import clip, json_loads, read_bytes, sanitize
from memdiag.text import normalize_key

# A facts file is a small profile; anything this big is almost certainly the wrong file.
MAX_BYTES = 64 * 1024 * 1024


def parse_timestamp(value: Any) -> datetime | None:
    """Parse an ISO-8601 string or an epoch number (seconds, or milliseconds) as aware UTC.

    Returns None for anything else, so callers can treat "no usable timestamp" uniformly.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)  # OverflowError for a 400-digit integer
            if seconds > 1e11:  # epoch milliseconds: 1e11 s would be the year 5138
                seconds /= 1000.0
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if re.fullmatch(r"\d{9,13}(\.\d+)?", text):
            return parse_timestamp(float(text))
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            return None
        return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt
    return None


@dataclass(frozen=True)
class FactEntry:
    """One value of one key, as written in the facts file."""

    key: str
    normalized_key: str
    value: str
    updated_at: str | None = None
    source: str | None = None
    line: int | None = None

    @property
    def timestamp(self) -> datetime | None:
        """``updated_at`` parsed, or None when absent or unparseable."""
        return parse_timestamp(self.updated_at)


@dataclass(frozen=True)
class KeyCollision:
    """Different raw keys that normalize to the same key (``User Name`` vs ``user_name``)."""

    normalized_key: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class FactsFile:
    """A parsed facts file: current values, per-key history, and key normalization report."""

    path: str
    shape: str  # "flat", "nested" or "records"
    entries: tuple[FactEntry, ...]  # current value per raw key, in file order
    history: dict[str, tuple[FactEntry, ...]] = field(default_factory=dict)  # oldest → current
    normalization_collisions: tuple[KeyCollision, ...] = ()

    def lookup(self, key: str) -> FactEntry | None:
        """The current entry for ``key``: exact raw key first, then the normalized key.

        When several raw keys share the normalized key, the most recently updated one wins
        (by ``updated_at`` when all have one, else the last in the file).
        """
        for e in self.entries:
            if e.key == key:
                return e
        norm = normalize_key(key)
        matches = [e for e in self.entries if e.normalized_key == norm]
        return _current(matches) if matches else None

    def as_dict(self) -> dict[str, str]:
        """Current values by raw key."""
        return {e.key: e.value for e in self.entries}

    def superseded(self) -> list[FactEntry]:
        """Older values of keys that were updated (the history minus the current entry)."""
        out: list[FactEntry] = []
        for entries in self.history.values():
            current = _current(list(entries))
            out.extend(e for e in entries if e is not current)
        return out


def _current(entries: list[FactEntry]) -> FactEntry:
    # Timestamps decide only when every entry has one: mixing dated and undated records has no
    # defensible order, and file order is what a human editing the file would expect.
    stamps = [e.timestamp for e in entries]
    if all(s is not None for s in stamps):
        best = max(range(len(entries)), key=lambda i: (stamps[i], i))
        return entries[best]
    return entries[-1]


def load_facts_file(path: str | Path) -> FactsFile:
    """Read and validate a JSON facts file; raise ``StoreError`` naming the position or key."""
    name = clip(str(path), 200)
    try:
        raw = read_bytes(path, MAX_BYTES, "JSON facts file")
    except InputError as e:
        message = "no such facts file" if e.message == "no such file" else e.message
        raise StoreError(message, path=e.path) from None
    if not raw.strip():
        raise StoreError("facts file is empty; expected a JSON object or list", path=name)
    if b"\x00" in raw:
        raise StoreError("binary file (NUL bytes), expected a JSON facts file", path=name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise StoreError(
            f"not UTF-8 text (bad byte at offset {e.start})", path=name, line=line
        ) from None
    try:
        data = json_loads(text)
    except json.JSONDecodeError as e:
        err = StoreError(f"{name}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}")
        err.path, err.line = name, e.lineno
        raise err from None
    except ValueError as e:  # beyond a limit: depth, digits, 1e400, NaN
        raise StoreError(str(e), path=name) from None

    if isinstance(data, dict):
        return _from_object(name, text, data)
    if isinstance(data, list):
        return _from_records(name, text, data)
    raise StoreError(
        f"top level is a JSON {type(data).__name__}; expected an object "
        '({"key": "value"}) or a list of {"key", "value"} records',
        path=name,
    )


# -- value checks -------------------------------------------------------------------------------


def scalar_text(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return json.dumps(v)
    return None


def _value_text(name: str, key: str, v: Any, line: int | None) -> str:
    text = scalar_text(v)
    if text is not None:
        return text
    # A list of scalars is a multi-valued fact ("allergies": ["peanuts", "shellfish"]).
    if isinstance(v, list) and all(scalar_text(x) is not None for x in v):
        return ", ".join(scalar_text(x) or "" for x in v)
    kind = "null" if v is None else type(v).__name__
    raise StoreError(
        f"key {clip(repr(key))}: value is {kind}; expected a string, number, boolean "
        "or a list of them",
        path=name,
        line=line,
    )


# -- positions: a walk over the already-validated text, so every entry knows its line ----------

_DECODER = json.JSONDecoder()
_WS = re.compile(r"\s*")


def _skip(text: str, i: int) -> int:
    m = _WS.match(text, i)
    return m.end() if m else i


class _Lines:
    """Line numbers of offsets in one text: newline positions found once, then bisected
    (counting newlines from the start for every entry was quadratic in the file size)."""

    def __init__(self, text: str) -> None:
        self.newlines = [m.start() for m in re.finditer("\n", text)]

    def __call__(self, i: int) -> int:
        return bisect.bisect_left(self.newlines, i) + 1


def _object_items(text: str, i: int) -> Iterator[tuple[str, Any, int]]:
    """Yield (key, value, value offset) of the JSON object starting at ``text[i]``."""
    i = _skip(text, i) + 1  # past "{"
    i = _skip(text, i)
    if text[i] == "}":
        return
    while True:
        key, i = _DECODER.raw_decode(text, _skip(text, i))
        key = sanitize(key)  # the validated parse fixed these; this re-read must too
        i = _skip(text, i) + 1  # past ":"
        start = _skip(text, i)
        value, i = _DECODER.raw_decode(text, start)
        yield key, sanitize(value), start
        i = _skip(text, i)
        if text[i] == "}":
            return
        i += 1  # past ","


def _array_items(text: str, i: int) -> Iterator[tuple[Any, int]]:
    i = _skip(text, i) + 1  # past "["
    i = _skip(text, i)
    if text[i] == "]":
        return
    while True:
        start = _skip(text, i)
        value, i = _DECODER.raw_decode(text, start)
        yield sanitize(value), start
        i = _skip(text, i)
        if text[i] == "]":
            return
        i += 1


def _from_object(name: str, text: str, data: dict[str, Any]) -> FactsFile:
    found: list[FactEntry] = []
    nested = False
    _line_of = _Lines(text)

    def walk(prefix: str, at: int) -> None:
        nonlocal nested
        for key, value, start in _object_items(text, at):
            full = f"{prefix}.{key}" if prefix else key
            line = _line_of(start)
            if isinstance(value, dict):
                nested = True
                if not value:
                    continue
                walk(full, start)
                continue
            if not full.strip():
                raise StoreError("empty key", path=name, line=line)
            found.append(
                FactEntry(
                    full, normalize_key(full), _value_text(name, full, value, line), line=line
                )
            )

    walk("", _skip(text, 0))
    return _assemble(name, "nested" if nested else "flat", found)


_RECORD_FIELDS = ("key", "value", "updated_at", "source")


def _from_records(name: str, text: str, data: list[Any]) -> FactsFile:
    found: list[FactEntry] = []
    _line_of = _Lines(text)
    for n, (item, start) in enumerate(_array_items(text, _skip(text, 0)), 1):
        line = _line_of(start)
        if not isinstance(item, dict):
            raise StoreError(
                f"record {n} is a JSON {type(item).__name__}; expected an object with "
                '"key" and "value"',
                path=name,
                line=line,
            )
        key = item.get("key")
        if not isinstance(key, str) or not key.strip():
            raise StoreError(
                f'record {n}: missing or non-string "key" (fields: {", ".join(item) or "none"})',
                path=name,
                line=line,
            )
        if "value" not in item:
            raise StoreError(
                f'record {n} (key {clip(repr(key))}): missing "value"', path=name, line=line
            )
        value = _value_text(name, key, item["value"], line)
        updated = item.get("updated_at")
        if updated is not None:
            if parse_timestamp(updated) is None:
                raise StoreError(
                    f"record {n} (key {clip(repr(key))}): updated_at {clip(repr(updated))} "
                    "is not an ISO-8601 time or an epoch number",
                    path=name,
                    line=line,
                )
            updated = updated if isinstance(updated, str) else json.dumps(updated)
        source = item.get("source")
        if source is not None and not isinstance(source, str):
            raise StoreError(
                f"record {n} (key {clip(repr(key))}): source must be a string", path=name, line=line
            )
        found.append(FactEntry(key, normalize_key(key), value, updated, source, line))
    return _assemble(name, "records", found)


def _assemble(name: str, shape: str, found: list[FactEntry]) -> FactsFile:
    by_key: dict[str, list[FactEntry]] = {}
    for e in found:
        by_key.setdefault(e.key, []).append(e)
    history: dict[str, tuple[FactEntry, ...]] = {}
    current: list[FactEntry] = []
    for key, entries in by_key.items():
        cur = _current(entries)
        current.append(cur)
        if len(entries) > 1:
            stamps = [e.timestamp for e in entries]
            if all(s is not None for s in stamps):
                entries = sorted(entries, key=lambda e: e.timestamp)  # type: ignore[arg-type,return-value]
            history[key] = tuple(entries)
    by_norm: dict[str, list[str]] = {}
    for e in current:
        by_norm.setdefault(e.normalized_key, []).append(e.key)
    collisions = tuple(
        KeyCollision(norm, tuple(keys)) for norm, keys in by_norm.items() if len(keys) > 1
    )
    return FactsFile(name, shape, tuple(current), history, collisions)
