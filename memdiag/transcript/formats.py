"""Input format registry and the two base formats: canonical JSONL and OpenAI chat.

A format is a :class:`Format`: ``detect(first)`` looks at the first parsed record,
``read(source, skip_invalid)`` yields raw items. Other importers register themselves in
``FORMATS`` from their own modules (see ``memdiag/transcript/importers.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from memdiag.errors import InputError
from memdiag.transcript.blocks import text_of
from memdiag.transcript.events import retrieval_from, window_from
from memdiag.transcript.model import (
    ROLES,
    RawItem,
    RawMessage,
    RawSession,
    RawSummary,
    Transcript,
    build,
)

MAX_BYTES = 2 * 1024**3
# fields of a message that the canonical reader interprets; any other key is metadata
MESSAGE_FIELDS = frozenset(
    {
        "role",
        "content",
        "id",
        "session",
        "ts",
        "timestamp",
        "name",
        "tool_calls",
        "tool_call_id",
        "forgot",
        "type",
    }
)


@dataclass
class Source:
    """A parsed input file: JSON Lines records (with line numbers) or one JSON document."""

    path: str
    records: list[tuple[int, Any]]  # (line, parsed object)
    is_jsonl: bool
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)

    def error(self, message: str, line: int | None = None) -> InputError:
        return InputError(message, path=self.path, line=line)


class Format(Protocol):
    name: str

    def detect(self, source: Source) -> bool: ...

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]: ...


FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    FORMATS[fmt.name] = fmt
    return fmt


def read_source(path: str | Path, skip_invalid: bool = False) -> Source:
    """Read a file as one JSON document or as JSON Lines; errors name file and line."""
    p = Path(path)
    name = str(path)
    if not p.exists():
        raise InputError("no such file", path=name)
    if p.is_dir():
        raise InputError("is a directory, expected a transcript file", path=name)
    if p.stat().st_size > MAX_BYTES:
        raise InputError("file larger than 2 GiB", path=name)
    data = p.read_bytes()
    if b"\x00" in data[:8192]:
        raise InputError("binary file (NUL bytes), expected UTF-8 JSON or JSON Lines", path=name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", path=name, line=line
        ) from None
    if not text.strip():
        raise InputError("empty file, expected JSON Lines with one message per line", path=name)
    stripped = text.lstrip()
    if stripped[0] in "[{":
        # one JSON document (a JSON array, or an object spread over several lines)?
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None
        else:
            if isinstance(doc, list):
                first_line = text[: len(text) - len(stripped)].count("\n") + 1
                return Source(name, [(first_line + 0, doc)], is_jsonl=False)
            if isinstance(doc, dict) and "\n" in text.strip():
                return Source(name, [(1, doc)], is_jsonl=False)
    records: list[tuple[int, Any]] = []
    skipped = 0
    warnings: list[str] = []
    for lineno, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            records.append((lineno, json.loads(raw)))
        except json.JSONDecodeError as exc:
            if skip_invalid:
                skipped += 1
                warnings.append(f"{name}:{lineno}: skipped: invalid JSON ({exc.msg})")
                continue
            raise InputError(
                f"invalid JSON at column {exc.colno}: {exc.msg}", path=name, line=lineno
            ) from None
    return Source(name, records, is_jsonl=True, skipped=skipped, warnings=warnings)


def detect_format(source: Source) -> str:
    # a format may declare a higher `priority` to be asked first (anthropic: its
    # `{"messages": [...]}` would otherwise go to openai); ties keep registration order
    for fmt in sorted(FORMATS.values(), key=lambda f: -getattr(f, "priority", 0)):
        if fmt.detect(source):
            return fmt.name
    raise InputError(
        "unrecognised transcript format; expected canonical JSONL (SPEC §2) or one of: "
        + ", ".join(FORMATS)
        + " (use --from NAME)",
        path=source.path,
    )


def load(path: str | Path, fmt: str | None = None, *, skip_invalid: bool = False) -> Transcript:
    """Load a transcript in any supported format (auto-detected unless ``fmt`` is given)."""
    _ensure_importers()
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    source = read_source(path, skip_invalid)
    name = fmt or detect_format(source)
    items = list(FORMATS[name].read(source, skip_invalid))
    if not any(isinstance(i, RawMessage) for i in items):
        raise InputError("no messages found", path=source.path)
    return build(
        items,
        path=source.path,
        format=name,
        skipped=source.skipped,
        warnings=source.warnings,
    )


def _ensure_importers() -> None:
    # importers register further formats on import; kept out of module import time
    import memdiag.transcript.importers
    import memdiag.transcript.langfuse
    import memdiag.transcript.langsmith
    import memdiag.transcript.letta
    import memdiag.transcript.otel  # noqa: F401


# --- helpers shared by readers ------------------------------------------------------------


def invalid(source: Source, skip_invalid: bool, line: int, message: str) -> None:
    """Raise an InputError for a bad record, or count it as skipped with --skip-invalid."""
    if skip_invalid:
        source.skipped += 1
        source.warnings.append(f"{source.path}:{line}: skipped: {message}")
        return
    raise source.error(message, line)


def opt_str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ValueError(f"field {key!r} must be a string, got {type(value).__name__}")


def message_from_dict(
    obj: dict[str, Any], line: int, role_map: Callable[[str], str] | None = None
) -> RawMessage:
    """Parse an OpenAI/canonical-style message dict. Raises ValueError naming the field."""
    if "role" not in obj:
        raise ValueError(f"missing field 'role'; expected one of {', '.join(ROLES)}")
    role = obj["role"]
    if not isinstance(role, str):
        raise ValueError(f"field 'role' must be a string, got {type(role).__name__}")
    if role_map is not None:
        role = role_map(role)
    if role == "developer":
        role = "system"
    if role == "function":
        role = "tool"
    if role not in ROLES:
        raise ValueError(f"field 'role': unknown role {role!r}; expected one of {', '.join(ROLES)}")
    try:
        content, meta = text_of(obj.get("content"))
    except ValueError as exc:
        raise ValueError(f"field 'content': {exc}") from None
    tool_calls = obj.get("tool_calls") or ()
    if not isinstance(tool_calls, (list, tuple)) or not all(
        isinstance(c, dict) for c in tool_calls
    ):
        raise ValueError("field 'tool_calls' must be a list of objects")
    # Anthropic-style tool_use blocks inside an assistant message count as tool calls
    blocks = meta.get("blocks", [])
    uses = [b for b in blocks if b.get("type") == "tool_use"]
    if uses:
        tool_calls = [
            *tool_calls,
            *(
                {
                    "id": b.get("id"),
                    "function": {"name": b.get("name"), "arguments": b.get("input", {})},
                }
                for b in uses
            ),
        ]
    forgot = obj.get("forgot")
    if forgot is not None and not isinstance(forgot, str):
        raise ValueError("field 'forgot' must be a string (the fact the agent should have used)")
    extra = {k: v for k, v in obj.items() if k not in MESSAGE_FIELDS}
    if extra:
        meta = {**meta, **extra}
    return RawMessage(
        role=role,
        content=content,
        line=line,
        id=opt_str(obj, "id"),
        session=opt_str(obj, "session"),
        ts=opt_str(obj, "ts") or opt_str(obj, "timestamp"),
        name=opt_str(obj, "name"),
        tool_calls=tuple(tool_calls),
        tool_call_id=opt_str(obj, "tool_call_id"),
        forgot=forgot,
        metadata=meta,
    )


# --- canonical JSONL ----------------------------------------------------------------------


class Canonical:
    name = "canonical"

    def detect(self, source: Source) -> bool:
        if not source.is_jsonl or not source.records:
            return False
        first = source.records[0][1]
        return isinstance(first, dict) and (
            "role" in first or first.get("type") in ("session", "summary", "window", "retrieval")
        )

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]:
        if not source.is_jsonl:
            raise source.error("canonical format is JSON Lines: one object per line", 1)
        for line, obj in source.records:
            if not isinstance(obj, dict):
                invalid(
                    source, skip_invalid, line, f"expected a JSON object, got {type(obj).__name__}"
                )
                continue
            kind = obj.get("type")
            try:
                if kind == "session":
                    sid = opt_str(obj, "id")
                    if not sid:
                        raise ValueError("missing field 'id' on a session line")
                    yield RawSession(sid, line, opt_str(obj, "ts") or opt_str(obj, "timestamp"))
                elif kind == "summary":
                    content = obj.get("content")
                    if not isinstance(content, str):
                        raise ValueError("field 'content' of a summary must be a string")
                    yield RawSummary(content, opt_str(obj, "replaces_through"), line)
                elif kind == "window":
                    yield window_from(obj, line)
                elif kind == "retrieval":
                    yield retrieval_from(obj, line)
                elif kind in (None, "message"):
                    yield message_from_dict(obj, line)
                else:
                    raise ValueError(
                        f"field 'type': unknown {kind!r}; expected session, summary, window, "
                        "retrieval or a message"
                    )
            except ValueError as exc:
                invalid(source, skip_invalid, line, str(exc))


# --- OpenAI chat --------------------------------------------------------------------------


class OpenAIChat:
    """`{"messages": [...]}` per line (one conversation = one session), or a JSON array."""

    name = "openai"

    def detect(self, source: Source) -> bool:
        if not source.records:
            return False
        first = source.records[0][1]
        if isinstance(first, dict):
            return isinstance(first.get("messages"), list)
        return (
            isinstance(first, list)
            and bool(first)
            and isinstance(first[0], dict)
            and ("role" in first[0] or isinstance(first[0].get("messages"), list))
        )

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]:
        conversations: list[tuple[int, Any]] = []
        for line, obj in source.records:
            if isinstance(obj, list) and obj and isinstance(obj[0], dict) and "role" in obj[0]:
                conversations.append((line, {"messages": obj}))
            elif isinstance(obj, list):
                conversations.extend((i + 1, o) for i, o in enumerate(obj))
            else:
                conversations.append((line, obj))
        many = len(conversations) > 1
        for n, (line, conv) in enumerate(conversations, start=1):
            if not isinstance(conv, dict) or not isinstance(conv.get("messages"), list):
                invalid(source, skip_invalid, line, "missing field 'messages' (a list)")
                continue
            if many:
                yield RawSession(str(conv.get("id") or f"s{n}"), line)
            for k, msg in enumerate(conv["messages"]):
                where = line if source.is_jsonl else k + 1
                if not isinstance(msg, dict):
                    invalid(source, skip_invalid, where, f"messages[{k}]: expected an object")
                    continue
                try:
                    yield message_from_dict(msg, where)
                except ValueError as exc:
                    invalid(source, skip_invalid, where, f"messages[{k}]: {exc}")


register(Canonical())
register(OpenAIChat())
