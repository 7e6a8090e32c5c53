"""OpenAI Batch API files (docs/traces.md): the input file and the output file, by `custom_id`.

The input file is what the user uploads: one request per line,
``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": {model, messages}}``.
The output file is what the batch returns: one line per request, in any order,
``{"id", "custom_id", "response": {"status_code", "request_id", "body": <a chat completion>},
"error"}`` (OpenAI's `BatchRequestOutput`). Give memdiag either file: the other one is looked
for beside it (a ``.jsonl`` file of the same folder whose lines answer, or ask, the same
``custom_id``s). Each request joined with its response is one
:class:`~memdiag.transcript.calls.Call`, in the input file's order; a request whose output
line failed (``error``, a status other than 200) has no reply. Sessions: ``body.metadata``'s
``session_id`` / ``conversation_id``, else the file is one conversation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memdiag.errors import InputError
from memdiag.transcript.calls import Call, CallItem, Usage
from memdiag.transcript.calls.interpret import interpret
from memdiag.transcript.calls.shapes import request_inputs, response_outputs
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.model import RawItem, RawMessage
from memdiag.transcript.source import Source, read_source
from memdiag.transcript.toolkit import PathError, reject
from memdiag.transcript.tracing import first_record, with_memory_tools

name = "openai_batch"
# a call log: asked with the traces, before the chat formats (a request body holds `messages`)
detect_priority = 16
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/calls/batch_input.jsonl", "formats/calls/batch_output.jsonl")
# it reads LLM calls: --agent chooses among their agents (docs/traces.md)
selects = {"agent": "--agent"}

SESSION_KEYS = ("session_id", "conversation_id", "thread_id")


def _is_input(obj: Any) -> bool:
    return isinstance(obj, dict) and "custom_id" in obj and isinstance(obj.get("body"), dict)


def _is_output(obj: Any) -> bool:
    return isinstance(obj, dict) and "custom_id" in obj and "response" in obj and "body" not in obj


def detect(source: Source) -> bool:
    first = first_record(source)
    return _is_input(first) or _is_output(first)


def _lines(source: Source, want: Any, what: str) -> dict[str, tuple[int, dict[str, Any]]]:
    out: dict[str, tuple[int, dict[str, Any]]] = {}
    for line, obj in source.records:
        if not want(obj):
            raise source.error(f"line {line}: not a Batch {what} line (custom_id, ...)", line)
        out.setdefault(str(obj["custom_id"]), (line, obj))
    return out


def _beside(source: Source, want: Any, ids: set[str]) -> Source | None:
    """The file of the same folder whose lines are the other half of this batch."""
    here = Path(source.path)
    if not here.is_file():
        return None
    for other in sorted(here.parent.glob("*.jsonl")):
        if other.resolve() == here.resolve():
            continue
        try:
            found = read_source(other)
        except InputError:
            continue
        first = first_record(found)
        if want(first) and str(first["custom_id"]) in ids:
            return found
    return None


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    if _is_input(first_record(source)):
        inputs = _lines(source, _is_input, "input")
        other = _beside(source, _is_output, set(inputs))
        outputs = _lines(other, _is_output, "output") if other is not None else {}
        in_path, out_path = source.path, other.path if other is not None else None
    else:
        outputs = _lines(source, _is_output, "output")
        other = _beside(source, _is_input, set(outputs))
        if other is None:
            raise source.error(
                "a Batch output file holds the replies only; the requests are in the batch's "
                "input file: put it in the same folder (docs/traces.md)"
            )
        inputs = _lines(other, _is_input, "input")
        in_path, out_path = other.path, source.path
    if out_path is None:
        source.warnings.append(
            f"{source.path}: no Batch output file beside it: the requests are read without "
            "their replies"
        )
    calls: list[CallItem] = []
    for custom_id, (line, request) in inputs.items():
        where = f"{Path(in_path).name}:{line}"
        try:
            body = request["body"]
            sent = request_inputs(body, f"{where}.body")
            replies: list[RawMessage] = []
            usage, model = Usage(), None
            if custom_id in outputs:
                out_line, answer = outputs[custom_id]
                at = f"{Path(str(out_path)).name}:{out_line}.response"
                response = answer.get("response")
                if (
                    isinstance(response, dict)
                    and response.get("status_code", 200) == 200
                    and answer.get("error") is None
                ):
                    replies, usage, model = response_outputs(response.get("body"), f"{at}.body")
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        raw_meta = body.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        session = next((str(meta[k]) for k in SESSION_KEYS if meta.get(k) is not None), None)
        requested = body.get("model")
        calls.append(
            Call(
                where,
                tuple(sent),
                tuple(replies),
                model or (None if requested is None else str(requested)),
                usage,
                session=session,
                id=custom_id,
            )
        )
    yield from with_memory_tools(interpret(calls, source, agent=selection.agent, unit="request"))
