"""Observed windows and retrievals (docs/reference.md#observed-windows): what the model really saw,
what memory returned.

Readers of sources that record each LLM call's real input yield :class:`RawWindow` and
:class:`RawRetrieval` items in their raw stream, next to the messages; :func:`resolve` turns them
into :class:`WindowEvent` / :class:`RetrievalEvent` over message indices once every message is
known. :class:`CallLedger` is the shared helper for trace readers, whose every call repeats the
conversation so far: it adds a message that appears in an input but nowhere earlier exactly
once, with a stable id, and emits the call's window.

This module sits below ``model.py`` (which imports it), so it never imports the model at runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class _Message(Protocol):
    """What resolving needs of a built message (model.Message, which imports this module)."""

    @property
    def index(self) -> int: ...

    @property
    def id(self) -> str: ...

    @property
    def role(self) -> str: ...


SECTIONS = ("system", "scratchpad", "summary", "memories", "messages")


@dataclass(frozen=True, slots=True)
class Extra:
    """Content of a request that is not a transcript message (memories, a pinned block, ...)."""

    section: str  # one of SECTIONS
    content: str
    covers: tuple[str, ...] = ()  # ids of the transcript messages it stands for (a summary)
    opaque: bool = False  # content not readable (an encrypted compaction item)
    tokens: int | None = None  # its size when known (opaque content cannot be counted)

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"section": self.section, "content": self.content}
        if self.covers:
            out["covers"] = list(self.covers)
        if self.opaque:
            out["opaque"] = True
        if self.tokens is not None:
            out["tokens"] = self.tokens
        return out


@dataclass(frozen=True, slots=True)
class Record:
    """One result of a recorded memory search."""

    id: str
    content: str
    score: float | None = None

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "score": self.score}


@dataclass(slots=True)
class RawWindow:
    """The request that produced message ``before`` held messages ``ids`` (in order) + extra."""

    before: str
    ids: tuple[str, ...]
    extra: tuple[Extra, ...] = ()
    prompt_tokens: int | None = None  # the provider's reported input tokens for this call
    model: str | None = None
    source: str | None = None  # where in the source file (span id, JSON path)
    line: int = 0


@dataclass(slots=True)
class RawRetrieval:
    """A long-term memory search the agent ran; ``before`` None: for the next assistant reply."""

    query: str
    records: tuple[Record, ...]
    before: str | None = None
    source: str | None = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class WindowEvent:
    before: int  # index of the message this request produced
    before_id: str
    indices: tuple[int, ...]  # transcript messages in the request, in order
    ids: tuple[str, ...]
    extra: tuple[Extra, ...] = ()
    prompt_tokens: int | None = None
    model: str | None = None
    source: str | None = None
    line: int = 0

    @property
    def compacted(self) -> tuple[str, ...]:
        """Ids of messages replaced by an opaque compaction in this request."""
        return tuple(i for e in self.extra if e.opaque for i in e.covers)

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "window", "before": self.before_id, "ids": list(self.ids)}
        if self.extra:
            out["extra"] = [e.record() for e in self.extra]
        for key in ("prompt_tokens", "model", "source"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class RetrievalEvent:
    before: int  # index of the message whose request this search served
    before_id: str
    query: str
    records: tuple[Record, ...]
    source: str | None = None
    line: int = 0

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "retrieval",
            "before": self.before_id,
            "query": self.query,
            "records": [r.record() for r in self.records],
        }
        if self.source is not None:
            out["source"] = self.source
        return out


RawEvent = RawWindow | RawRetrieval


def resolve(
    pending: Sequence[tuple[RawEvent, int]],
    messages: Sequence[_Message],
    path: str,
    by_id: Mapping[str, int] | None = None,
) -> tuple[tuple[WindowEvent, ...], tuple[RetrievalEvent, ...]]:
    """Resolve raw events against the built messages.

    ``pending`` holds (event, number of messages before it in the stream); ``by_id`` maps the
    messages' ids to their indices (made from ``messages`` when not given). Raises InputError
    naming the file, line and field for an id that is referenced but missing.
    """
    from memdiag.errors import InputError

    if not pending:
        return (), ()
    if by_id is None:
        by_id = {m.id: m.index for m in messages}
    windows: list[WindowEvent] = []
    retrievals: list[RetrievalEvent] = []

    def where(ev: RawEvent) -> str:
        return f"{ev.source}: " if ev.source else ""

    def index_of(ev: RawEvent, mid: str, field_name: str) -> int:
        if mid not in by_id:
            raise InputError(
                f"{where(ev)}field {field_name}: no message with id {mid!r}",
                path=path,
                line=ev.line,
            )
        return by_id[mid]

    for ev, after in pending:
        if isinstance(ev, RawWindow):
            before = index_of(ev, ev.before, "'before'")
            indices = []
            for k, mid in enumerate(ev.ids):
                i = index_of(ev, mid, f"'ids'[{k}]")
                if i >= before:
                    raise InputError(
                        f"{where(ev)}field 'ids'[{k}]: {mid!r} does not come before {ev.before!r}",
                        path=path,
                        line=ev.line,
                    )
                indices.append(i)
            for e in ev.extra:
                for k, mid in enumerate(e.covers):
                    index_of(ev, mid, f"'extra'.covers[{k}]")
            windows.append(
                WindowEvent(
                    before,
                    ev.before,
                    tuple(indices),
                    tuple(ev.ids),
                    ev.extra,
                    ev.prompt_tokens,
                    ev.model,
                    ev.source,
                    ev.line,
                )
            )
        else:
            if ev.before is not None:
                before = index_of(ev, ev.before, "'before'")
            else:
                before = next((m.index for m in messages[after:] if m.role == "assistant"), -1)
                if before < 0:
                    raise InputError(
                        f"{where(ev)}retrieval with no assistant reply after it",
                        path=path,
                        line=ev.line,
                    )
            retrievals.append(
                RetrievalEvent(
                    before, messages[before].id, ev.query, ev.records, ev.source, ev.line
                )
            )
    windows.sort(key=lambda w: w.before)
    retrievals.sort(key=lambda r: r.before)
    return tuple(windows), tuple(retrievals)


# --- canonical records --------------------------------------------------------------------


def _str_list(obj: dict[str, Any], key: str) -> tuple[str, ...]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) for v in value):
        raise ValueError(f"field {key!r} must be a list of message ids")
    return tuple(str(v) for v in value)


def _opt_int(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"field {key!r} must be a non-negative integer")
    return value


def _opt_text(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError(f"field {key!r} must be a string")
    return str(value)


def extra_from(obj: Any, k: int) -> Extra:
    if not isinstance(obj, dict):
        raise ValueError(f"field 'extra'[{k}] must be an object")
    section = obj.get("section")
    if section not in SECTIONS:
        raise ValueError(
            f"field 'extra'[{k}].section: {section!r}; expected one of {', '.join(SECTIONS)}"
        )
    content = obj.get("content", "")
    if not isinstance(content, str):
        raise ValueError(f"field 'extra'[{k}].content must be a string")
    try:
        covers = _str_list(obj, "covers")
        tokens = _opt_int(obj, "tokens")
    except ValueError as exc:
        raise ValueError(f"'extra'[{k}]: {exc}") from None
    return Extra(str(section), content, covers, bool(obj.get("opaque", False)), tokens)


def window_from(obj: dict[str, Any], line: int) -> RawWindow:
    """A canonical `{"type": "window"}` line. Raises ValueError naming the field."""
    before = _opt_text(obj, "before")
    if not before:
        raise ValueError("missing field 'before' (the id of the message this request produced)")
    if "ids" not in obj:
        raise ValueError("missing field 'ids' (the message ids of the request, in order)")
    extra = obj.get("extra", [])
    if not isinstance(extra, list):
        raise ValueError("field 'extra' must be a list of {section, content}")
    return RawWindow(
        before,
        _str_list(obj, "ids"),
        tuple(extra_from(e, k) for k, e in enumerate(extra)),
        _opt_int(obj, "prompt_tokens"),
        _opt_text(obj, "model"),
        _opt_text(obj, "source"),
        line,
    )


def record_from(obj: Any, k: int) -> Record:
    if not isinstance(obj, dict):
        raise ValueError(f"field 'records'[{k}] must be an object")
    rid = obj.get("id", f"r{k + 1}")
    content = obj.get("content")
    if not isinstance(content, str):
        raise ValueError(f"field 'records'[{k}].content must be a string")
    score = obj.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise ValueError(f"field 'records'[{k}].score must be a number or null")
    return Record(str(rid), content, None if score is None else float(score))


def retrieval_from(obj: dict[str, Any], line: int) -> RawRetrieval:
    """A canonical `{"type": "retrieval"}` line. Raises ValueError naming the field."""
    query = obj.get("query", "")
    if not isinstance(query, str):
        raise ValueError("field 'query' must be a string")
    records = obj.get("records")
    if not isinstance(records, list):
        raise ValueError("missing field 'records' (a list of {id, content, score})")
    return RawRetrieval(
        query,
        tuple(record_from(r, k) for k, r in enumerate(records)),
        _opt_text(obj, "before"),
        _opt_text(obj, "source"),
        line,
    )
