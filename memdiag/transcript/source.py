"""Reading an input file, and the parsing helpers that the format readers share.

:func:`read_source` turns a file into a :class:`Source`: JSON Lines records (each with its
line; also several JSON values one after another, not one per line) or one JSON document.
:class:`Elements` gives a reader the top-level records either way. Readers refuse bad records
through :mod:`memdiag.transcript.toolkit`.

Line numbers: a JSON Lines record keeps its own line. Inside one JSON document, a message's
``line`` is the 1-based number of the top-level element that holds it, while error messages
name the real line where that element starts: the file is re-scanned for it only when there is
an error, so valid input is parsed once.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdiag.errors import InputError
from memdiag.fileio import LimitError, decode_utf8, json_loads, read_bytes
from memdiag.transcript.blocks import drop_nulls as drop_nulls  # re-exported for formats
from memdiag.transcript.blocks import text_of
from memdiag.transcript.model import ROLES, RawMessage, ReadProblem
from memdiag.transcript.toolkit import PathError

MAX_BYTES = 2 * 1024**3
STDIN = "<stdin>"  # the name of standard input (the path `-`) in errors and reports
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
    # every record skipped with --skip-invalid, with the error a strict read stops at
    problems: list[ReadProblem] = field(default_factory=list)
    # what the file can and cannot tell, said to the user (Transcript.notes)
    notes: list[str] = field(default_factory=list)

    def error(self, message: str, line: int | None = None) -> InputError:
        return InputError(message, path=self.path, line=line)


def _read_file(name: str) -> tuple[str, bytes]:
    data = read_bytes(name, MAX_BYTES, "transcript")  # regular files only, read with a bound
    if data[:4] == b"PK\x03\x04":  # a chat export as downloaded: read its conversations.json
        return _export_member(Path(name), name)
    return name, data


def read_source(path: str | Path, skip_invalid: bool = False) -> Source:
    """Read a file as one JSON document or as JSON Lines; errors name file and line.

        Several JSON values one after another (pretty-printed spans) are read as records, like JSON
    Lines. ``-`` reads standard input (named ``<stdin>`` in errors and reports). Reading is bounded
        (:mod:`memdiag.fileio`): size, nesting depth, integer digits; lone surrogates replaced.
    """
    name = str(path)
    if name == "-":
        import sys

        name = STDIN
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise InputError("input larger than 2 GiB", path=name)
    else:
        name, data = _read_file(name)
    text = decode_utf8(data, name, "JSON or JSON Lines transcript")
    if not text.strip():
        raise InputError("empty file, expected JSON Lines with one message per line", path=name)
    stripped = text.lstrip()
    doc_error: json.JSONDecodeError | None = None
    if stripped[0] in "[{":
        # one JSON document (a JSON array, or an object spread over several lines)?
        try:
            doc = json_loads(text)
        except json.JSONDecodeError as exc:
            # kept without its traceback: that holds this frame (the records read below, and
            # the caller's frames with what they build), a cycle only a full collection frees
            doc, doc_error = None, exc.with_traceback(None)
        except LimitError as exc:  # valid JSON beyond a limit: no use reading it as lines
            if "\n" in text.strip():
                raise InputError(str(exc), path=name) from None
            doc = None
        else:
            if isinstance(doc, list):
                first_line = text[: len(text) - len(stripped)].count("\n") + 1
                return Source(name, [(first_line + 0, doc)], is_jsonl=False)
            if isinstance(doc, dict) and "\n" in text.strip():
                return Source(name, [(1, doc)], is_jsonl=False)
    source = Source(name, [], is_jsonl=True)
    escapes = "\\u" in text  # decoded UTF-8 holds no lone surrogate; only an escape can
    for lineno, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            source.records.append((lineno, json_loads(raw, escapes)))
        except ValueError as exc:
            if isinstance(exc, json.JSONDecodeError):
                if doc_error is not None and not source.records and "\n" in text.strip():
                    if doc_error.msg == "Extra data":  # JSON values one after another
                        return Source(name, _concatenated(text, name), is_jsonl=True)
                    # not JSON Lines either: one document cut short or broken (an export)
                    cut = doc_error.pos >= len(text.rstrip()) or doc_error.msg.startswith("Unterm")
                    ends = " (the file ends there: truncated?)" if cut else ""
                    raise InputError(
                        f"invalid JSON at column {doc_error.colno}: {doc_error.msg}{ends}",
                        path=name,
                        line=doc_error.lineno,
                    ) from None
                message = f"invalid JSON at column {exc.colno}: {exc.msg}"
                short = f"invalid JSON ({exc.msg})"
            else:
                message = short = str(exc)
            if not skip_invalid:
                raise InputError(message, path=name, line=lineno) from None
            source.skipped += 1
            source.warnings.append(f"{name}:{lineno}: skipped: {short}")
            source.problems.append(ReadProblem(message, lineno))
    return source


_BLANK = re.compile(r"\s*")


def _concatenated(text: str, name: str) -> list[tuple[int, Any]]:
    """Several JSON values one after another, not one per line (pretty-printed objects, as
    OpenTelemetry's ConsoleSpanExporter writes spans by default): each with the line where it
    starts, read as JSON Lines records are. An InputError names the first value that is not
    JSON, by its line and column."""
    decoder = json.JSONDecoder()
    out: list[tuple[int, Any]] = []
    pos, line, counted = 0, 1, 0
    while True:
        match = _BLANK.match(text, pos)
        pos = match.end() if match else pos
        if pos >= len(text):
            return out
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            _, end = decoder.raw_decode(text, pos)
            value = json_loads(text[pos:end])  # again, with the reader's limits
        except json.JSONDecodeError as exc:
            cut = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterm")
            ends = " (the file ends there: truncated?)" if cut else ""
            raise InputError(
                f"invalid JSON at column {exc.colno}: {exc.msg}{ends} (value {len(out) + 1} "
                "of a file of JSON values one after another)",
                path=name,
                line=exc.lineno,
            ) from None
        except (ValueError, RecursionError) as exc:  # a limit (fileio.LimitError)
            why = str(exc) if isinstance(exc, ValueError) else "nested too deep"
            raise InputError(why, path=name, line=line) from None
        out.append((line, value))
        pos = end


_BLOB_KEYS = {"file_data", "data", "base64", "image_url", "url"}


def slim_blobs(value: Any) -> Any:
    """A copy where inline files (data: URLs, base64 `file_data`/`data`) are replaced by their
    size: an image sent inline would otherwise be copied into the canonical output whole."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            inline = isinstance(v, str) and (v.startswith("data:") or len(v) > 4096)
            out[k] = (
                f"<inline data, {len(v)} chars>" if k in _BLOB_KEYS and inline else slim_blobs(v)
            )
        return out
    if isinstance(value, list):
        return [slim_blobs(v) for v in value]
    return value


EXPORT_MEMBER = "conversations.json"


def _export_member(path: Path, name: str) -> tuple[str, bytes]:
    """The conversations.json of a ChatGPT or Claude.ai export zip (`export.zip/conversations.json`
    names it in messages)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            members = [
                i for i in archive.infolist() if i.filename.rsplit("/", 1)[-1] == EXPORT_MEMBER
            ]
            if not members:
                listed = ", ".join(archive.namelist()[:8])
                raise InputError(
                    f"a zip file without {EXPORT_MEMBER} (a ChatGPT or Claude.ai export has one); "
                    f"it holds: {listed}",
                    path=name,
                )
            member = min(members, key=lambda i: i.filename.count("/"))
            if member.file_size > MAX_BYTES:
                raise InputError(f"{member.filename}: larger than 2 GiB", path=name)
            return f"{name}/{member.filename}", archive.read(member)
    except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
        raise InputError(f"cannot read the zip file: {exc}", path=name) from None


# --- the top-level elements of a source ---------------------------------------------------

_SEPARATORS = re.compile(r"[\s,]*")


def _array_element_lines(path: str) -> list[int]:
    """The line where each element of a top-level JSON array starts ([] if it can't be told)."""
    try:
        text = decode_utf8(read_bytes(path, MAX_BYTES), path)
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
    except (InputError, ValueError):
        return []


class Elements:
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


# --- fields -------------------------------------------------------------------------------


def opt_str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, (str, int, float)):
        return str(value)
    raise PathError("", f"field {key!r} must be a string, got {type(value).__name__}")


def path_str(obj: dict[str, Any], key: str, prefix: str = "") -> str | None:
    """opt_str whose error names the field with its path (``data.id``)."""
    try:
        return opt_str(obj, key)
    except ValueError:
        raise PathError(
            "", f"field '{prefix}{key}' must be a string, got {type(obj[key]).__name__}"
        ) from None


def require_str(obj: dict[str, Any], key: str, what: str = "a string") -> str:
    value = obj.get(key)
    if value is None:
        raise PathError("", f"missing field {key!r} ({what})")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise PathError("", f"field {key!r} must be {what}, got {type(value).__name__}")
    return str(value)


def check_blocks(content: Any) -> None:
    """Reject content blocks whose `type` is not a string, with the block's number.

    blocks.text_of looks the type up in a set, which fails on a list or an object.
    """
    if isinstance(content, list):
        for k, block in enumerate(content):
            if isinstance(block, dict) and not isinstance(block.get("type", ""), str):
                raise PathError("", f"content block {k}: field 'type' must be a string")


def checked_text(content: Any) -> tuple[str, dict[str, Any]]:
    """blocks.text_of after :func:`check_blocks`."""
    check_blocks(content)
    return text_of(content)


def check_tool_calls(calls: Any, field: str = "tool_calls") -> None:
    """Reject tool calls whose ``function`` is not an object (``{"function": "lookup"}``) or
    whose id, name or arguments have the wrong type; the error names the path of the value."""
    for k, call in enumerate(calls):
        where = f"{field}[{k}]"
        if not isinstance(call, dict):
            raise PathError("", f"field '{where}' must be an object, got {type(call).__name__}")
        call_id = call.get("id")
        if call_id is not None and (
            isinstance(call_id, bool) or not isinstance(call_id, (str, int))
        ):
            raise PathError(
                "", f"field '{where}.id' must be a string, got {type(call_id).__name__}"
            )
        fn = call.get("function", call)
        if not isinstance(fn, dict):
            raise PathError(
                "",
                f"field '{where}.function' must be an object with 'name' and 'arguments', "
                f"got {type(fn).__name__}",
            )
        if fn is not call:
            where += ".function"
        name = fn.get("name")
        if name is not None and not isinstance(name, str):
            raise PathError("", f"field '{where}.name' must be a string, got {type(name).__name__}")


def openai_tool_call(call_id: str | None, name: Any, arguments: Any) -> dict[str, Any]:
    # the shape of OpenAI tool calls, which the rest of memdiag reads (blocks.tool_call_text)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# --- OpenAI-style message dicts (canonical, openai, anthropic) ----------------------------


def message_from_dict(obj: dict[str, Any], line: int) -> RawMessage:
    """Parse an OpenAI/canonical-style message dict. Raises ValueError naming the field."""
    if "role" not in obj:
        raise PathError("", f"missing field 'role'; expected one of {', '.join(ROLES)}")
    role = obj["role"]
    if not isinstance(role, str):
        raise PathError("", f"field 'role' must be a string, got {type(role).__name__}")
    if role == "developer":
        role = "system"
    if role == "function":
        role = "tool"
    if role not in ROLES:
        raise PathError(
            "", f"field 'role': unknown role {role!r}; expected one of {', '.join(ROLES)}"
        )
    content = obj.get("content")
    meta: dict[str, Any]
    if type(content) is str:  # the common case, without a call
        meta = {}
    else:
        try:
            content, meta = text_of(content)
        except ValueError as exc:
            raise PathError("", f"field 'content': {exc}") from None
    tool_calls = obj.get("tool_calls") or ()
    if tool_calls and (
        not isinstance(tool_calls, (list, tuple))
        or not all(isinstance(c, dict) for c in tool_calls)
    ):
        raise PathError("", "field 'tool_calls' must be a list of objects")
    # Anthropic-style tool_use blocks inside an assistant message count as tool calls
    blocks = meta.get("blocks") if meta else None
    uses = [b for b in blocks if b.get("type") == "tool_use"] if blocks else None
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
    calls: tuple[dict[str, Any], ...] = ()
    if tool_calls:
        check_tool_calls(tool_calls)
        calls = tuple(tool_calls)
    forgot = obj.get("forgot")
    if forgot is not None and not isinstance(forgot, str):
        raise PathError("", "field 'forgot' must be a string (the fact the agent should have used)")
    # SDK dumps fill optional fields with null (refusal, audio, usage details): not copied
    if not obj.keys() <= MESSAGE_FIELDS:
        extra = {
            k: drop_nulls(v) for k, v in obj.items() if k not in MESSAGE_FIELDS and v is not None
        }
        if extra:
            meta = {**meta, **extra}
    # the optional string fields: most are absent or strings, which opt_str returns as they are
    get = obj.get
    mid, session, ts, stamp = get("id"), get("session"), get("ts"), get("timestamp")
    name, call_id = get("name"), get("tool_call_id")
    if (
        (mid is None or type(mid) is str)
        and (session is None or type(session) is str)
        and (ts is None or type(ts) is str)
        and (stamp is None or type(stamp) is str)
        and (name is None or type(name) is str)
        and (call_id is None or type(call_id) is str)
    ):
        ts = ts or stamp
    else:  # a number to convert, or the error of the first wrong field
        mid, session = opt_str(obj, "id"), opt_str(obj, "session")
        ts = opt_str(obj, "ts") or opt_str(obj, "timestamp")
        name, call_id = opt_str(obj, "name"), opt_str(obj, "tool_call_id")
    # positional, in RawMessage's field order: the cheaper call, once per message
    return RawMessage(role, content, line, mid, session, ts, name, calls, call_id, forgot, meta)


# --- exports: one conversation out of many --------------------------------------------


def iso_time(value: Any) -> str | None:
    """An epoch (seconds, as ChatGPT exports write it) or an ISO string → ISO 8601 UTC."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            moment = dt.datetime.fromtimestamp(float(value), tz=dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
        return moment.isoformat().replace("+00:00", "Z")
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class Choice:
    """One conversation (or SDK session) that a file holds, as listed to the user."""

    id: str
    title: str = ""
    messages: int = 0
    ts: str | None = None
    unit: str = "message"

    def line(self) -> str:
        parts = [self.id]
        if self.title:
            parts.append(repr(self.title))
        parts.append(f"{self.messages} {self.unit}{'s' if self.messages != 1 else ''}")
        if self.ts:
            parts.append(self.ts)
        return "  " + "  ".join(parts)


LISTED = 50  # conversations listed when none is chosen (an export may hold thousands)


class ChoiceNeeded(InputError):
    """A file holds several conversations and none was chosen: exit 2 with the list."""

    listing = True

    def __init__(self, path: str, head: str, flag: str, choices: Sequence[Choice]) -> None:
        self.choices = tuple(choices)
        shown = [c.line() for c in self.choices[:LISTED]]
        if len(self.choices) > LISTED:
            shown.append(f"  ... and {len(self.choices) - LISTED} more")
        listing = "\n".join(shown)
        how = "ID or title" if any(c.title for c in self.choices) else "ID"
        super().__init__(
            f"{head}; choose one with {flag} {how} (or {flag} all):\n{listing}", path=path
        )


def choose(
    path: str, what: str, flag: str, choices: Sequence[Choice], select: str | None
) -> list[int]:
    """The chosen conversations: ``all``; or one by id, by exact title, or by a unique
    case-insensitive title prefix; or the only one. Raises ChoiceNeeded with the list."""
    if select == "all":
        return list(range(len(choices)))
    if select is None:
        if len(choices) == 1:
            return [0]
        raise ChoiceNeeded(path, f"holds {len(choices)} {what}s", flag, choices)
    for k, c in enumerate(choices):
        if c.id == select:
            return [k]
    titled = [k for k, c in enumerate(choices) if c.title == select]
    if not titled:
        folded = select.casefold()
        titled = [k for k, c in enumerate(choices) if c.title.casefold().startswith(folded)]
    if len(titled) == 1:
        return titled
    if len(titled) > 1:
        head = f"{len(titled)} {what}s match {select!r}"
        raise ChoiceNeeded(path, head, flag, [choices[k] for k in titled])
    raise ChoiceNeeded(path, f"no {what} is {select!r} among {len(choices)}", flag, choices)
