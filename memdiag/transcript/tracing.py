"""Parsing helpers shared by the trace formats (OpenTelemetry, LangSmith, Langfuse, Letta).

A trace records LLM *calls*; each call's input repeats the conversation so far. The readers turn
calls into messages and observed windows with :class:`memdiag.transcript.events.CallLedger`.
Errors name the file and the path inside it (``otel.json: [3].attributes.gen_ai.input.messages
[2].role: unknown role 'robot'``); with ``--skip-invalid`` the bad call is skipped and counted.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memdiag.transcript.events import Extra, RawRetrieval, RawWindow, Record
from memdiag.transcript.model import ROLES, RawMessage
from memdiag.transcript.source import Source, json_loads
from memdiag.transcript.toolkit import PathError


def first_record(source: Source) -> Any:
    """The file's first document, or the first element when it is a JSON array (a trace export
    is either): what format detection looks at."""
    if not source.records:
        return None
    first = source.records[0][1]
    if isinstance(first, list):
        return first[0] if first else None
    return first


def maybe_json(value: Any, where: str) -> Any:
    """Attributes hold structured values as JSON strings; parse them when they are."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("[", "{"):
            try:
                return json_loads(stripped)
            except ValueError as exc:  # invalid, or beyond the reader's limits
                why = getattr(exc, "msg", str(exc))
                raise PathError(where, f"invalid JSON in attribute ({why})") from None
    return value


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def role_of(value: Any, where: str, aliases: dict[str, str] | None = None) -> str:
    role = value
    if isinstance(role, str) and aliases:
        role = aliases.get(role, role)
    if role == "developer":
        role = "system"
    if role not in ROLES:
        raise PathError(
            f"{where}.role", f"unknown role {value!r}; expected one of {', '.join(ROLES)}"
        )
    return str(role)


def tool_call(call_id: Any, name: Any, arguments: Any, where: str = "") -> dict[str, Any]:
    """A tool call in the OpenAI shape the rest of memdiag reads; ``where`` is the path of
    ``name`` in the file, for the error when it is not a string."""
    if name is not None and not isinstance(name, str):
        raise PathError(where or "tool call name", f"expected a string, got {type(name).__name__}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return {
        "id": None if call_id is None else str(call_id),
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


# where a retrieved document keeps its id and score: on the document (OpenInference's
# `document.id` / `document.score`), else in its metadata (vector-store retrievers)
_ID_KEYS = ("id", "doc_id", "document_id", "memory_id", "_id", "uuid")
_SCORE_KEYS = ("score", "relevance_score", "similarity", "similarity_score")


def records_of(value: Any, where: str) -> tuple[Record, ...]:
    """Memory records / retrieved documents: `[{id?, content, score?, metadata?}]`."""
    value = maybe_json(value, where)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise PathError(where, "expected a list of records {id, content, score}")
    out = []
    for k, rec in enumerate(value):
        if isinstance(rec, str):
            out.append(Record(f"r{k + 1}", rec))
            continue
        if not isinstance(rec, dict):
            raise PathError(f"{where}[{k}]", "expected a record object")
        content = rec.get("content", rec.get("page_content", rec.get("text")))
        if content is None:
            raise PathError(f"{where}[{k}]", "record without 'content'")
        raw_meta = rec.get("metadata")
        if isinstance(raw_meta, str):  # OpenInference writes a document's metadata as JSON
            try:
                raw_meta = json_loads(raw_meta)
            except ValueError:
                raw_meta = None
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        score = next(
            (
                v
                for v in (rec.get(key, meta.get(key)) for key in _SCORE_KEYS)
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            ),
            None,
        )
        rid = next(
            (rec.get(key) or meta.get(key) for key in _ID_KEYS if rec.get(key) or meta.get(key)),
            f"r{k + 1}",
        )
        out.append(Record(str(rid), as_text(content), None if score is None else float(score)))
    return tuple(out)


def sub(obj: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``obj[key]`` when it must be an object: empty when missing, null or empty, a PathError
    naming ``where.key`` when it is a value of another type (a string where usage belongs)."""
    value = obj.get(key)
    if not value:
        return {}
    if not isinstance(value, dict):
        at = f"{where}.{key}" if where else key
        raise PathError(at, f"expected an object, got {type(value).__name__}")
    return value


N = TypeVar("N")


def ancestors(node: N, by_id: Mapping[str, N], parent_of: Callable[[N], Any]) -> Iterator[N]:
    """The parents of a span, run or observation, nearest first; stops at a parent that is not
    in the file or at a cycle (a parent seen before)."""
    seen: set[str] = set()
    parent = parent_of(node)
    while parent is not None and str(parent) in by_id and str(parent) not in seen:
        seen.add(str(parent))
        node = by_id[str(parent)]
        yield node
        parent = parent_of(node)


def int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


# --- memory tools: a search the agent ran as a tool call, with its result --------------------

MEMORY_TOOLS = frozenset(
    {
        "archival_memory_search",  # Letta / MemGPT
        "conversation_search",  # Letta: recall memory
        "search_memory",  # OpenTelemetry's operation name, LangMem
        "search_memories",  # mem0 MCP
        "memory_search",
        "recall_memory",
        "retrieve_memories",
    }
)
_QUERY_KEYS = ("query", "q", "text", "search_query")
_LIST_KEYS = ("results", "memories", "records", "documents", "passages")


def _query_of(arguments: Any) -> str:
    try:
        args = json_loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return str(arguments)
    if isinstance(args, dict):
        for key in _QUERY_KEYS:
            if isinstance(args.get(key), str):
                return str(args[key])
    return as_text(args)


def _result_records(text: str) -> tuple[Record, ...]:
    try:
        value: Any = json_loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        value = next((value[k] for k in _LIST_KEYS if isinstance(value.get(k), list)), None)
    if isinstance(value, list):
        out = []
        for k, rec in enumerate(value):
            if isinstance(rec, dict):
                content = next(
                    (rec[c] for c in ("content", "memory", "text", "page_content") if c in rec),
                    rec,
                )
                rid = rec.get("id") or f"r{k + 1}"
                score = rec.get("score")
                number = (
                    float(score)
                    if isinstance(score, (int, float)) and not isinstance(score, bool)
                    else None
                )
                out.append(Record(str(rid), as_text(content), number))
            else:
                out.append(Record(f"r{k + 1}", as_text(rec)))
        return tuple(out)
    return (Record("r1", text),) if text.strip() else ()


def with_memory_tools(items: Iterable[Any]) -> Iterator[Any]:
    """Pass a raw stream through, adding a retrieval after each memory tool's result."""
    pending: dict[str, tuple[str, str]] = {}  # tool call id -> (tool name, query)
    for item in items:
        yield item
        if not isinstance(item, RawMessage):
            continue
        for call in item.tool_calls:
            fn = call.get("function") or {}
            if fn.get("name") in MEMORY_TOOLS and call.get("id") is not None:
                pending[str(call["id"])] = (str(fn["name"]), _query_of(fn.get("arguments")))
        if item.role == "tool" and item.tool_call_id in pending:
            name, query = pending.pop(item.tool_call_id)
            yield RawRetrieval(query, _result_records(item.content), None, f"tool {name}")


# --- the ledger: calls with full inputs → messages added once + windows --------------------


def fingerprint(m: RawMessage) -> tuple[Any, ...]:
    calls = tuple(str(c.get("id")) for c in m.tool_calls)
    return (m.role, " ".join(m.content.split()), m.tool_call_id, calls)


@dataclass
class CallLedger:
    """Turns a sequence of LLM calls (full inputs + outputs) into messages and windows."""

    known: list[tuple[tuple[Any, ...], str, str]] = field(default_factory=list)  # fp, id, session
    ids: dict[str, int] = field(default_factory=dict)  # message id -> index in known
    current: str | None = None
    counts: dict[tuple[Any, ...], int] = field(default_factory=dict)
    # (session, fingerprint) -> indices in known, ascending; session -> its last index
    _by_fp: dict[tuple[str, tuple[Any, ...]], list[int]] = field(default_factory=dict)
    _last: dict[str, int] = field(default_factory=dict)

    def session(self, sid: str | None) -> None:
        self.current = sid

    def _new_id(self, m: RawMessage, fp: tuple[Any, ...]) -> str:
        if m.id and m.id not in self.ids:
            return m.id
        n = self.counts.get(fp, 0)
        self.counts[fp] = n + 1
        digest = hashlib.sha1(repr((fp, self.current, n)).encode()).hexdigest()
        mid = "h" + digest[:10]
        while mid in self.ids:
            digest = hashlib.sha1(digest.encode()).hexdigest()
            mid = "h" + digest[:10]
        return mid

    def _add(self, m: RawMessage, fp: tuple[Any, ...]) -> RawMessage:
        m.id = self._new_id(m, fp)
        if m.session is None and self.current is not None:
            m.session = self.current
        session = str(self.current)
        k = len(self.known)
        self.ids[m.id] = k
        self.known.append((fp, m.id, session))
        self._by_fp.setdefault((session, fp), []).append(k)
        self._last[session] = k
        return m

    def _latest(
        self, fp: tuple[Any, ...], mid: str | None, bound: int, used: set[int]
    ) -> int | None:
        """The latest known message of this session before ``bound`` that is this one.

        The source's own id decides when it has one; else role, text and tool ids do.
        """
        session = str(self.current)
        if mid is not None and mid in self.ids:
            k = self.ids[mid]
            ok = k < bound and k not in used and self.known[k][2] == session
            return k if ok else None
        found = self._by_fp.get((session, fp), [])
        j = bisect.bisect_left(found, bound) - 1
        while j >= 0 and found[j] in used:
            j -= 1
        return found[j] if j >= 0 else None

    def _tail_start(self, inputs: list[RawMessage], fps: list[tuple[Any, ...]]) -> int:
        """Where the messages that are new in this request begin.

        A request repeats what the agent kept and ends with what is new: everything after the
        last known message of the session (usually the previous reply). Without it, the new
        part starts at the request's last user message (the new question).
        """
        last = self._last.get(str(self.current))
        if last is not None:
            lfp, lid, _ = self.known[last]
            for i in range(len(inputs) - 1, -1, -1):
                if inputs[i].id == lid or (inputs[i].id not in self.ids and fps[i] == lfp):
                    return i + 1
        users = [i for i, m in enumerate(inputs) if m.role == "user"]
        return users[-1] if users else len(inputs)

    def call(
        self,
        inputs: Iterable[RawMessage],
        outputs: Sequence[RawMessage],
        *,
        extra: tuple[Extra, ...] = (),
        prompt_tokens: int | None = None,
        model: str | None = None,
        source: str | None = None,
        line: int = 0,
    ) -> list[RawMessage | RawWindow]:
        """New messages of this call (inputs not seen before, then the outputs) + its window.

        With no output (a failed call), no window is emitted: there is no reply to attach it to.
        """
        items: list[RawMessage | RawWindow] = []
        inputs = list(inputs)
        fps = [fingerprint(m) for m in inputs]
        tail = self._tail_start(inputs, fps)
        found: list[int | None] = [None] * len(inputs)
        used: set[int] = set()
        bound = len(self.known)
        # what the agent kept: aligned with the latest messages (a repeated "ok" is the last one)
        for i in range(tail - 1, -1, -1):
            k = self._latest(fps[i], inputs[i].id, bound, used)
            if k is not None:
                found[i] = k
                used.add(k)
                bound = k
        # what is new: a message the agent injects again (a system block) is the known one
        for i in range(tail, len(inputs)):
            if inputs[i].role == "system" or inputs[i].id in self.ids:
                k = self._latest(fps[i], inputs[i].id, len(self.known), used)
                if k is not None:
                    found[i] = k
                    used.add(k)
        ids: list[str] = []
        for i, m in enumerate(inputs):
            k = found[i]
            if k is None:
                items.append(self._add(m, fps[i]))
                k = len(self.known) - 1
                used.add(k)
            ids.append(self.known[k][1])
        first_out: str | None = None
        for m in outputs:
            fp = fingerprint(m)
            # a reply is always new: the same words said twice are two messages
            added = self._add(m, fp)
            items.append(added)
            first_out = first_out or added.id
        if first_out is not None:
            items.append(
                RawWindow(first_out, tuple(ids), extra, prompt_tokens, model, source, line)
            )
        return items
