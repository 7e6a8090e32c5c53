"""Importers for transcript formats that users already have (SPEC §2).

Each format is a small class registered in ``FORMATS``: ``anthropic`` (Messages API),
``langchain`` (message dicts), ``sharegpt``, ``locomo`` and ``longmemeval`` (the two long-term
memory benchmarks). :func:`locomo_probes` and :func:`longmemeval_probes` return the benchmarks'
questions as probes (fact, evidence message ids, turn) over the same message ids as the reader.

Line numbers: a JSON Lines record keeps its own line. Inside one JSON document, a message's
``line`` is the 1-based number of the top-level element that holds it (as in the OpenAI reader),
while error messages name the real line where that element starts: the file is re-scanned for
it only when there is an error, so valid input is parsed once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdiag.errors import InputError
from memdiag.transcript.blocks import text_of
from memdiag.transcript.formats import (
    Source,
    invalid,
    message_from_dict,
    opt_str,
    read_source,
    register,
)
from memdiag.transcript.model import ROLES, RawItem, RawMessage, RawSession

# --- shared helpers -----------------------------------------------------------------------

_SEPARATORS = re.compile(r"[\s,]*")


def _array_element_lines(path: str) -> list[int]:
    """The line where each element of a top-level JSON array starts ([] if it can't be told)."""
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
        decoder = json.JSONDecoder()
        pos = text.index("[") + 1
        lines: list[int] = []
        line, counted = 1, 0
        while True:
            match = _SEPARATORS.match(text, pos)
            pos = match.end() if match else pos
            if pos >= len(text) or text[pos] == "]":
                return lines
            line += text.count("\n", counted, pos)
            counted = pos
            lines.append(line)
            _, pos = decoder.raw_decode(text, pos)
    except (OSError, ValueError):
        return []


class _Elements:
    """The top-level records of a source: JSON Lines records, or the elements of one document."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.is_array = (
            not source.is_jsonl and bool(source.records) and isinstance(source.records[0][1], list)
        )
        self.items: list[tuple[int, Any]]
        if source.is_jsonl or not source.records:
            self.items = list(source.records)
        elif self.is_array:
            self.items = [(k + 1, e) for k, e in enumerate(source.records[0][1])]
        else:
            self.items = [source.records[0]]
        self._starts: list[int] | None = None

    def first(self) -> Any:
        return self.items[0][1] if self.items else None

    def line(self, n: int) -> int:
        """The real source line where element ``n`` starts, for error messages."""
        if not self.is_array:
            return self.items[n][0]
        if self._starts is None:
            self._starts = _array_element_lines(self.source.path)
        if n < len(self._starts):
            return self._starts[n]
        return self.source.records[0][0]  # the line of the opening bracket

    def bad(self, n: int, skip_invalid: bool, message: str) -> None:
        invalid(self.source, skip_invalid, self.line(n), message)


def _field(obj: dict[str, Any], key: str, prefix: str = "") -> str | None:
    """opt_str whose error names the field with its path (``data.id``)."""
    try:
        return opt_str(obj, key)
    except ValueError:
        raise ValueError(
            f"field '{prefix}{key}' must be a string, got {type(obj[key]).__name__}"
        ) from None


def _require_str(obj: dict[str, Any], key: str, what: str = "a string") -> str:
    value = obj.get(key)
    if value is None:
        raise ValueError(f"missing field {key!r} ({what})")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"field {key!r} must be {what}, got {type(value).__name__}")
    return str(value)


def _check_blocks(content: Any) -> None:
    """Reject content blocks whose `type` is not a string, with the block's number.

    blocks.text_of looks the type up in a set, which fails on a list or an object.
    """
    if isinstance(content, list):
        for k, block in enumerate(content):
            if isinstance(block, dict) and not isinstance(block.get("type", ""), str):
                raise ValueError(f"content block {k}: field 'type' must be a string")


def _text(content: Any) -> tuple[str, dict[str, Any]]:
    _check_blocks(content)
    return text_of(content)


def _openai_tool_call(call_id: str | None, name: Any, arguments: Any) -> dict[str, Any]:
    # the shape of OpenAI tool calls, which the rest of memdiag reads (blocks.tool_call_text)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# --- Anthropic Messages API ---------------------------------------------------------------

# block types that only the Anthropic API produces (OpenAI uses image_url, input_text, ...)
_ANTHROPIC_BLOCKS = {
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "document",
}
_OPENAI_BLOCKS = {"image_url", "input_text", "output_text", "input_audio", "file", "refusal"}


@dataclass
class _Conversation:
    index: int  # element holding the conversation (for error lines)
    line: int
    top: dict[str, Any]  # system, id, model, ...
    messages: list[tuple[int, int, Any]] = field(default_factory=list)  # (element, line, msg)
    bare_lines: bool = False  # gathered from JSON Lines records that are messages themselves


def _anthropic_conversations(els: _Elements) -> Iterator[_Conversation]:
    """Group the elements into conversations: `{"system"?, "messages": [...]}` records, a bare
    list of messages, or consecutive bare message records (a log of API messages).

    A generator, so that detection can stop at the first conversation that tells.
    """
    bare: _Conversation | None = None
    for n, (line, el) in enumerate(els.items):
        if isinstance(el, dict) and "role" in el and "messages" not in el:
            if bare is None:
                bare = _Conversation(n, line, {}, bare_lines=els.source.is_jsonl)
            bare.messages.append((n, line, el))
            continue
        if bare is not None:
            yield bare
            bare = None
        if isinstance(el, list):
            yield _Conversation(n, line, {}, [(n, line, m) for m in el])
        elif isinstance(el, dict) and isinstance(el.get("messages"), list):
            yield _Conversation(n, line, el, [(n, line, m) for m in el["messages"]])
        else:
            yield _Conversation(n, line, el if isinstance(el, dict) else {}, [])
    if bare is not None:
        yield bare


def _anthropic_signal(conv: _Conversation) -> bool | None:
    """True: surely Anthropic; False: surely not (OpenAI signals); None: can't tell."""
    top = conv.top
    if not conv.messages:
        return False
    if isinstance(top.get("system"), (str, list)):
        return True
    first = conv.messages[0][2]
    if not top and isinstance(first, dict) and first.get("type") == "message" and "model" in first:
        return True  # a Messages API response object
    if conv.bare_lines:
        # one message per line is canonical JSONL, which allows Anthropic blocks (SPEC §2) and
        # has session and summary lines that this reader does not know
        return False
    for _, _, msg in conv.messages:
        if not isinstance(msg, dict):
            continue
        if msg.get("role") in ("system", "developer", "tool", "function") or "tool_calls" in msg:
            return False  # Anthropic keeps the system prompt and tool results elsewhere
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if not isinstance(kind, str):
                continue
            if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block):
                return True
            if kind in _OPENAI_BLOCKS:
                return False
    if top.get("type") == "message" or str(top.get("model", "")).startswith("claude"):
        return True
    return None


def _anthropic_message(msg: Any, line: int) -> list[RawMessage]:
    """One API message → canonical messages: tool_result blocks become `tool` messages."""
    if not isinstance(msg, dict):
        raise ValueError(f"expected a message object, got {type(msg).__name__}")
    content = msg.get("content")
    try:
        _check_blocks(content)
    except ValueError as exc:
        raise ValueError(f"field 'content': {exc}") from None
    if not isinstance(content, list):
        return [message_from_dict(msg, line)]
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    if not results:
        return [message_from_dict(msg, line)]
    if msg.get("role") != "user":
        raise ValueError("tool_result blocks belong in a user message")
    out: list[RawMessage] = []
    for k, block in enumerate(results):
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError(f"tool_result block {k}: missing field 'tool_use_id'")
        try:
            text, meta = _text(block.get("content"))
        except ValueError as exc:
            raise ValueError(f"tool_result block {k}: field 'content': {exc}") from None
        if block.get("is_error"):
            meta = {**meta, "is_error": True}
        out.append(RawMessage("tool", text, line, tool_call_id=call_id, metadata=meta))
    rest = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
    # a user message holding only tool results is the API's way to return them, not a user turn
    if rest:
        out.append(message_from_dict({**msg, "content": rest}, line))
    return out


class Anthropic:
    """Anthropic Messages API: `{"system"?, "messages": [...]}` per line, a JSON document
    (or a list of them), or a log of message objects; one conversation = one session."""

    name = "anthropic"
    # asked before `openai`, which would read `{"messages": [...]}` but miss tool_result blocks
    priority = 10

    def detect(self, source: Source) -> bool:
        for conv in _anthropic_conversations(_Elements(source)):
            signal = _anthropic_signal(conv)
            if signal is not None:
                return signal
        return False

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]:
        els = _Elements(source)
        convs = list(_anthropic_conversations(els))
        many = len(convs) > 1
        for n, conv in enumerate(convs, start=1):
            label = f"conversation {n}: " if many and els.is_array else ""
            if not conv.messages:
                if not isinstance(conv.top.get("messages"), list):  # [] is just an empty chat
                    els.bad(conv.index, skip_invalid, f"{label}missing field 'messages' (a list)")
                continue
            if many:
                yield RawSession(str(conv.top.get("id") or f"s{n}"), conv.line)
            if conv.top.get("system") is not None:
                try:
                    text, meta = _text(conv.top["system"])
                except ValueError as exc:
                    els.bad(conv.index, skip_invalid, f"{label}field 'system': {exc}")
                else:
                    yield RawMessage("system", text, conv.line, metadata=meta)
            for k, (element, line, msg) in enumerate(conv.messages):
                try:
                    yield from _anthropic_message(msg, line)
                except ValueError as exc:
                    where = f"messages[{k}]: " if conv.top or els.is_array else ""
                    els.bad(element, skip_invalid, f"{label}{where}{exc}")


# --- LangChain ----------------------------------------------------------------------------

_LANGCHAIN_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "developer": "system",
}
# class names of the `dumpd` form and of streamed chunks → the `type` of messages_to_dict
_LANGCHAIN_CLASSES = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
}
_LANGCHAIN_KEPT = (
    "additional_kwargs",
    "response_metadata",
    "invalid_tool_calls",
    "usage_metadata",
    "status",
    "artifact",
)


def _is_langchain(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    if "lc" in obj and isinstance(obj.get("kwargs"), dict):
        return True
    return isinstance(obj.get("data"), dict) and isinstance(obj.get("type"), str)


def _langchain_kind(obj: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if "lc" in obj and isinstance(obj.get("kwargs"), dict):
        ident = obj.get("id")
        cls = ident[-1] if isinstance(ident, list) and ident else ""
        return _LANGCHAIN_CLASSES.get(str(cls).removesuffix("Chunk"), str(cls)), obj["kwargs"]
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ValueError("missing field 'type'; expected human, ai, system or tool")
    data = obj.get("data")
    if not isinstance(data, dict):
        raise ValueError("missing field 'data' (an object with 'content')")
    return _LANGCHAIN_CLASSES.get(kind.removesuffix("Chunk"), kind), data


def _langchain_message(obj: Any, line: int) -> RawMessage:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a message object, got {type(obj).__name__}")
    kind, data = _langchain_kind(obj)
    if kind == "chat":  # ChatMessage carries its own role
        role = _field(data, "role", "data.") or ""
        role = {"human": "user", "ai": "assistant"}.get(role, role)
    else:
        role = _LANGCHAIN_ROLES.get(kind, "")
    if role not in ROLES:
        raise ValueError(
            f"field 'type': unknown message type {kind!r}; expected human, ai, system or tool"
        )
    try:
        content, meta = _text(data.get("content"))
    except ValueError as exc:
        raise ValueError(f"field 'data.content': {exc}") from None
    calls = data.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise ValueError("field 'data.tool_calls' must be a list of objects")
    tool_calls = [_openai_tool_call(c.get("id"), c.get("name"), c.get("args", {})) for c in calls]
    extra = data.get("additional_kwargs")
    if not tool_calls and isinstance(extra, dict) and isinstance(extra.get("tool_calls"), list):
        tool_calls = [c for c in extra["tool_calls"] if isinstance(c, dict)]  # OpenAI's shape
    if not tool_calls:  # an Anthropic model's reply keeps its tool_use blocks in the content
        tool_calls = [
            _openai_tool_call(b.get("id"), b.get("name"), b.get("input", {}))
            for b in meta.get("blocks", [])
            if b.get("type") == "tool_use"
        ]
    for key in _LANGCHAIN_KEPT:
        if data.get(key):
            meta = {**meta, key: data[key]}
    return RawMessage(
        role=role,
        content=content,
        line=line,
        id=_field(data, "id", "data."),
        name=_field(data, "name", "data."),
        tool_calls=tuple(tool_calls),
        tool_call_id=_field(data, "tool_call_id", "data."),
        metadata=meta,
    )


class LangChain:
    """LangChain message dicts (`messages_to_dict`, or `dumpd`'s constructor form) one per line
    or as a JSON array; an array of arrays holds several conversations (one session each)."""

    name = "langchain"

    def detect(self, source: Source) -> bool:
        first = _Elements(source).first()
        if isinstance(first, list) and first:
            first = first[0]
        return _is_langchain(first)

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]:
        els = _Elements(source)
        many = sum(isinstance(el, list) for _, el in els.items) > 1
        for n, (line, el) in enumerate(els.items):
            if isinstance(el, list):
                if many:
                    yield RawSession(f"s{n + 1}", line)
                messages: list[tuple[int | None, Any]] = list(enumerate(el))
            else:
                messages = [(None, el)]
            for k, msg in messages:
                try:
                    yield _langchain_message(msg, line)
                except ValueError as exc:
                    where = f"[{k}]: " if k is not None else ""
                    els.bad(n, skip_invalid, f"{where}{exc}")


# --- ShareGPT -----------------------------------------------------------------------------

_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "tool": "tool",
    "observation": "tool",
    "function_response": "tool",
    "function_call": "assistant",
}


def _sharegpt_calls(value: str, sid: str, k: int) -> list[dict[str, Any]]:
    """The tool calls of a `function_call` turn (JSON `{"name", "arguments"}` or a list)."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return []
    calls = parsed if isinstance(parsed, list) else [parsed]
    if not calls or not all(isinstance(c, dict) and "name" in c for c in calls):
        return []
    # ShareGPT has no call ids: make ones that are unique in the transcript so that the
    # following observation pairs with its call
    return [
        _openai_tool_call(f"{sid}-call{k}-{j}", c["name"], c.get("arguments", c.get("parameters")))
        for j, c in enumerate(calls)
    ]


class ShareGPT:
    """`{"conversations": [{"from", "value"}]}` per line or as a JSON array; each conversation
    is one session, named by its `id` (s1, s2, ... without one)."""

    name = "sharegpt"

    def detect(self, source: Source) -> bool:
        first = _Elements(source).first()
        return isinstance(first, dict) and isinstance(first.get("conversations"), list)

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]:
        els = _Elements(source)
        for n, (line, conv) in enumerate(els.items):
            label = f"conversation {n + 1}: " if els.is_array else ""
            if not isinstance(conv, dict) or not isinstance(conv.get("conversations"), list):
                els.bad(n, skip_invalid, f"{label}missing field 'conversations' (a list)")
                continue
            sid = str(conv.get("id") or f"s{n + 1}")
            yield RawSession(sid, line)
            if isinstance(conv.get("system"), str) and conv["system"]:
                yield RawMessage("system", conv["system"], line)
            pending: list[str] = []  # tool call ids waiting for their observation
            for k, turn in enumerate(conv["conversations"]):
                try:
                    msg = self._turn(turn, line, sid, k, pending)
                except ValueError as exc:
                    els.bad(n, skip_invalid, f"{label}conversations[{k}]: {exc}")
                    continue
                yield msg

    @staticmethod
    def _turn(turn: Any, line: int, sid: str, k: int, pending: list[str]) -> RawMessage:
        if not isinstance(turn, dict):
            raise ValueError(f"expected an object, got {type(turn).__name__}")
        speaker = turn.get("from", turn.get("role"))
        if not isinstance(speaker, str):
            raise ValueError("missing field 'from' (human, gpt, system, ...)")
        role = _SHAREGPT_ROLES.get(speaker.lower())
        if role is None:
            raise ValueError(
                f"field 'from': unknown speaker {speaker!r}; expected one of "
                + ", ".join(_SHAREGPT_ROLES)
            )
        value = turn.get("value", turn.get("content"))
        if not isinstance(value, str):
            raise ValueError("missing field 'value' (a string)")
        meta = {
            key: v for key, v in turn.items() if key not in ("from", "role", "value", "content")
        }
        if speaker.lower() == "function_call":
            calls = _sharegpt_calls(value, sid, k)
            if calls:
                pending.extend(c["id"] for c in calls)
                return RawMessage(role, "", line, tool_calls=tuple(calls), metadata=meta)
        call_id = pending.pop(0) if role == "tool" and pending else None
        return RawMessage(role, value, line, tool_call_id=call_id, metadata=meta)


# --- LoCoMo -------------------------------------------------------------------------------

_LOCOMO_SESSION = re.compile(r"session_(\d+)\Z")
_LOCOMO_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_LOCOMO_TURN_FIELDS = ("speaker", "dia_id", "text")


def _dia_key(dia_id: str) -> str:
    """A dialogue id in one spelling (`D:3:05` → `D3:5`), to match evidence with messages."""
    m = _LOCOMO_EVIDENCE.search(dia_id)
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else dia_id


@dataclass
class _Sample:
    """One LoCoMo sample read into raw items, with what its QA needs."""

    index: int
    label: str  # "sample 'conv-26': "
    sample_id: str
    prefix: str  # prepended to session and message ids when a file holds several samples
    items: list[RawItem]
    ids: dict[str, str]  # normalized dia_id → message id


def _locomo_samples(els: _Elements, skip_invalid: bool) -> Iterator[tuple[_Sample, Any]]:
    many = len(els.items) > 1
    for n, (line, sample) in enumerate(els.items):
        if not isinstance(sample, dict):
            els.bad(n, skip_invalid, f"sample {n + 1}: expected an object")
            continue
        sample_id = str(sample.get("sample_id") or f"sample{n + 1}")
        label = f"sample {sample_id!r}: "
        conv = sample.get("conversation")
        if not isinstance(conv, dict):
            els.bad(n, skip_invalid, f"{label}missing field 'conversation' (an object)")
            continue
        speakers: dict[str, str] = {}
        problem = None
        for key, role in (("speaker_a", "user"), ("speaker_b", "assistant")):
            name = conv.get(key)
            if not isinstance(name, str) or not name:
                problem = f"{label}missing field 'conversation.{key}' (the speaker's name)"
            else:
                speakers.setdefault(name, role)
        if problem:
            els.bad(n, skip_invalid, problem)
            continue
        prefix = f"{sample_id}/" if many else ""
        found = _Sample(n, label, sample_id, prefix, [], {})
        numbers = sorted(int(m.group(1)) for k in conv if (m := _LOCOMO_SESSION.match(k)))
        for number in numbers:
            key = f"session_{number}"
            turns = conv[key]
            if not isinstance(turns, list):
                els.bad(n, skip_invalid, f"{label}field 'conversation.{key}' must be a list")
                continue
            if not turns:
                continue  # a date without turns (conv-26 has such sessions): nothing was said
            date = conv.get(f"{key}_date_time")
            ts = date if isinstance(date, str) else None
            found.items.append(RawSession(prefix + key, line, ts))
            for k, turn in enumerate(turns):
                try:
                    msg = _locomo_message(turn, line, speakers, prefix)
                except ValueError as exc:
                    els.bad(n, skip_invalid, f"{label}conversation.{key}[{k}]: {exc}")
                    continue
                found.ids[_dia_key(str(msg.metadata.get("dia_id", msg.id)))] = str(msg.id)
                found.items.append(msg)
        yield found, sample


def _locomo_message(turn: Any, line: int, speakers: dict[str, str], prefix: str) -> RawMessage:
    if not isinstance(turn, dict):
        raise ValueError(f"expected an object, got {type(turn).__name__}")
    for key in _LOCOMO_TURN_FIELDS:
        if not isinstance(turn.get(key), str):
            raise ValueError(f"missing field {key!r} (a string)")
    speaker = turn["speaker"]
    if speaker not in speakers:
        raise ValueError(
            f"field 'speaker': {speaker!r} is neither speaker_a nor speaker_b "
            f"({', '.join(map(repr, speakers))})"
        )
    meta = {k: v for k, v in turn.items() if k not in _LOCOMO_TURN_FIELDS}
    if prefix:
        meta["dia_id"] = turn["dia_id"]
    content = turn["text"]
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption:
        # the speaker shared a picture; its caption is the only trace of it that a text model
        # (and LoCoMo's own baselines) can see, and QA items ask about it
        content = f"{content} [image: {caption}]"
    return RawMessage(
        role=speakers[speaker],
        content=content,
        line=line,
        id=prefix + turn["dia_id"],
        name=speaker,
        metadata=meta,
    )


class LoCoMo:
    """LoCoMo (snap-research): a JSON list of samples, one session per `session_N` in numeric
    order; speaker_a → user, speaker_b → assistant, `dia_id` kept as the message id."""

    name = "locomo"

    def detect(self, source: Source) -> bool:
        first = _Elements(source).first()
        return (
            isinstance(first, dict)
            and isinstance(first.get("conversation"), dict)
            and ("sample_id" in first or "speaker_a" in first["conversation"])
        )

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]:
        for sample, _ in _locomo_samples(_Elements(source), skip_invalid):
            yield from sample.items


def locomo_probes(path: str | Path, *, skip_invalid: bool = False) -> list[dict[str, Any]]:
    """The QA items of a LoCoMo file as probes over the ids that the `locomo` reader gives.

    Each probe: ``id``, ``question``, ``answer`` (a string; None for an adversarial question
    without one), ``evidence_ids`` (message ids), ``category``, ``sample_id``, ``at`` (None:
    LoCoMo asks after the conversation) and ``after_turn`` (the sample's last turn); plus
    ``adversarial_answer`` and ``unresolved_evidence`` (evidence naming no message) when present.
    Evidence strings are parsed tolerantly: "D8:6; D9:17" holds two ids, "D:11:26" and "D30:05"
    are read as D11:26 and D30:5. Raises InputError for malformed items (unless skip_invalid).
    """
    source = read_source(path, skip_invalid)
    if not LoCoMo().detect(source):
        raise InputError("not a LoCoMo file (expected a list of samples)", path=source.path)
    els = _Elements(source)
    probes: list[dict[str, Any]] = []
    turn = 0
    for sample, raw in _locomo_samples(els, skip_invalid):
        turn += sum(isinstance(i, RawMessage) and i.role == "user" for i in sample.items)
        qa = raw.get("qa", [])
        if not isinstance(qa, list):
            els.bad(sample.index, skip_invalid, f"{sample.label}field 'qa' must be a list")
            continue
        for j, item in enumerate(qa):
            try:
                probe = _locomo_probe(item, sample)
            except ValueError as exc:
                els.bad(sample.index, skip_invalid, f"{sample.label}qa[{j}]: {exc}")
                continue
            probes.append({"id": f"{sample.sample_id}/q{j + 1}", **probe, "after_turn": turn})
    return probes


def _locomo_probe(item: Any, sample: _Sample) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ValueError(f"expected an object, got {type(item).__name__}")
    question = _require_str(item, "question")
    if item.get("answer") is None and item.get("adversarial_answer") is None:
        raise ValueError("missing field 'answer' (or 'adversarial_answer')")
    evidence = item.get("evidence", [])
    if isinstance(evidence, str):
        evidence = [evidence]
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise ValueError("field 'evidence' must be a list of dialogue ids like 'D1:3'")
    ids: list[str] = []
    unresolved: list[str] = []
    for text in evidence:
        matches = _LOCOMO_EVIDENCE.findall(text)
        if not matches:
            unresolved.append(text)
        for session, number in matches:
            key = f"D{int(session)}:{int(number)}"
            if key not in sample.ids:
                unresolved.append(key)
            elif sample.ids[key] not in ids:
                ids.append(sample.ids[key])
    answer = item.get("answer")
    probe: dict[str, Any] = {
        "question": question,
        "answer": None if answer is None else str(answer),
        "evidence_ids": ids,
        "category": item.get("category"),
        "sample_id": sample.sample_id,
        "at": None,
    }
    if item.get("adversarial_answer") is not None:
        probe["adversarial_answer"] = str(item["adversarial_answer"])
    if unresolved:
        probe["unresolved_evidence"] = unresolved
    return probe


# --- LongMemEval --------------------------------------------------------------------------


@dataclass
class _Instance:
    """One LongMemEval instance read into raw items, with what its probe needs."""

    raw: dict[str, Any]
    index: int
    question_id: str
    prefix: str
    items: list[RawItem]
    evidence: list[str]  # ids of has_answer messages


def _lme_sessions(inst: dict[str, Any]) -> tuple[list[Any], list[str], list[str | None]]:
    sessions = inst.get("haystack_sessions")
    if not isinstance(sessions, list):
        raise ValueError("missing field 'haystack_sessions' (a list of sessions)")
    ids = inst.get("haystack_session_ids")
    if ids is None:
        ids = [f"h{k + 1}" for k in range(len(sessions))]
    if not isinstance(ids, list) or len(ids) != len(sessions):
        raise ValueError(
            f"field 'haystack_session_ids' must be a list of {len(sessions)} ids, "
            "one per haystack session"
        )
    dates = inst.get("haystack_dates")
    if dates is None:
        dates = [None] * len(sessions)
    if not isinstance(dates, list) or len(dates) != len(sessions):
        raise ValueError(
            f"field 'haystack_dates' must be a list of {len(sessions)} dates, "
            "one per haystack session"
        )
    return sessions, [str(i) for i in ids], [d if isinstance(d, str) else None for d in dates]


def _lme_instances(els: _Elements, skip_invalid: bool) -> Iterator[_Instance]:
    many = len(els.items) > 1
    for n, (line, inst) in enumerate(els.items):
        if not isinstance(inst, dict):
            els.bad(n, skip_invalid, f"instance {n + 1}: expected an object")
            continue
        try:
            qid = _require_str(inst, "question_id")
            question = _require_str(inst, "question")
            sessions, sids, dates = _lme_sessions(inst)
        except ValueError as exc:
            els.bad(n, skip_invalid, f"instance {n + 1}: {exc}")
            continue
        label = f"question {qid!r}: "
        prefix = f"{qid}/" if many else ""
        found = _Instance(inst, n, qid, prefix, [], [])
        seen: dict[str, int] = {}
        for k, (turns, sid, date) in enumerate(zip(sessions, sids, dates, strict=True)):
            where = f"{label}haystack_sessions[{k}]"
            if not isinstance(turns, list):
                els.bad(n, skip_invalid, f"{where}: must be a list of turns")
                continue
            if not turns:
                continue
            seen[sid] = seen.get(sid, 0) + 1
            if seen[sid] > 1:  # the same session twice in one haystack: keep ids unique
                sid = f"{sid}#{seen[sid]}"
            found.items.append(RawSession(prefix + sid, line, date))
            for t, turn in enumerate(turns):
                try:
                    msg = _lme_message(turn, line, f"{prefix}{sid}:{t + 1}")
                except ValueError as exc:
                    els.bad(n, skip_invalid, f"{where}[{t}]: {exc}")
                    continue
                if msg.metadata.get("has_answer"):
                    found.evidence.append(str(msg.id))
                found.items.append(msg)
        # the question is the turn where memory is tested, in a session of its own
        date = inst.get("question_date")
        found.items.append(RawSession(qid, line, date if isinstance(date, str) else None))
        meta = {"question_type": inst["question_type"]} if "question_type" in inst else {}
        found.items.append(RawMessage("user", question, line, id=qid, metadata=meta))
        yield found


def _lme_message(turn: Any, line: int, mid: str) -> RawMessage:
    if not isinstance(turn, dict):
        raise ValueError(f"expected an object, got {type(turn).__name__}")
    role = turn.get("role")
    if role not in ("user", "assistant", "system"):
        raise ValueError(f"field 'role': {role!r}; expected user or assistant")
    content = turn.get("content")
    if not isinstance(content, str):
        raise ValueError("missing field 'content' (a string)")
    meta = {k: v for k, v in turn.items() if k not in ("role", "content")}
    if meta.get("has_answer") is False:
        del meta["has_answer"]  # only the evidence turns are worth marking
    return RawMessage(role, content, line, id=mid, metadata=meta)


class LongMemEval:
    """LongMemEval: a JSON list of instances; each haystack session is a session (ids from
    `haystack_session_ids`, message ids `<session>:<n>`), then the question as the last user
    message in a session named after `question_id`."""

    name = "longmemeval"

    def detect(self, source: Source) -> bool:
        first = _Elements(source).first()
        return isinstance(first, dict) and "haystack_sessions" in first

    def read(self, source: Source, skip_invalid: bool) -> Iterator[RawItem]:
        for inst in _lme_instances(_Elements(source), skip_invalid):
            yield from inst.items


def longmemeval_probes(path: str | Path, *, skip_invalid: bool = False) -> list[dict[str, Any]]:
    """The questions of a LongMemEval file as probes over the ids the `longmemeval` reader gives.

    Each probe: ``id`` (question_id), ``question``, ``answer`` (the fact, as a string),
    ``evidence_ids`` (messages marked has_answer), ``evidence_sessions`` (answer_session_ids),
    ``category`` (question_type), ``at`` (turn number of the question) and ``at_id`` (its
    message id), ``question_date``. Raises InputError for malformed instances.
    """
    source = read_source(path, skip_invalid)
    if not LongMemEval().detect(source):
        raise InputError("not a LongMemEval file (expected a list of instances)", path=source.path)
    els = _Elements(source)
    probes: list[dict[str, Any]] = []
    turn = 0
    for inst in _lme_instances(els, skip_invalid):
        turn += sum(isinstance(i, RawMessage) and i.role == "user" for i in inst.items)
        raw = inst.raw
        if raw.get("answer") is None:
            els.bad(
                inst.index, skip_invalid, f"question {inst.question_id!r}: missing field 'answer'"
            )
            continue
        sessions = raw.get("answer_session_ids") or []
        probes.append(
            {
                "id": inst.question_id,
                "question": str(raw["question"]),
                "answer": str(raw["answer"]),
                "evidence_ids": inst.evidence,
                "evidence_sessions": [inst.prefix + str(s) for s in sessions]
                if isinstance(sessions, list)
                else [],
                "category": raw.get("question_type"),
                "at": turn,
                "at_id": inst.question_id,
                "question_date": raw.get("question_date"),
            }
        )
    return probes


register(Anthropic())
register(LangChain())
register(ShareGPT())
register(LoCoMo())
register(LongMemEval())
