"""OpenAI Responses API items (docs/reference.md#transcript-input): a JSON array of items (what
`responses.create` takes
as `input`, what `result.to_input_list()` returns), one item per line, or one Response object
(its `output`). How items become messages: :mod:`memdiag.transcript.responses_items`.
"""

from __future__ import annotations

from collections.abc import Iterator

from memdiag.transcript.model import RawItem
from memdiag.transcript.responses_items import Item, is_responses_item, read_items
from memdiag.transcript.source import Source

name = "openai_responses"
# before canonical and openai: a first bare `{"role", "content"}` item would go to them, and
# the `function_call` after it fail
detect_priority = 20
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = ("formats/openai_responses/items.json",)
# canonical JSON Lines records that no Responses item has
_CANONICAL = {"session", "summary", "window", "retrieval"}
_CHAT_KEYS = {"forgot", "session", "tool_calls", "tool_call_id"}


def _elements(source: Source, limit: int | None = None) -> list[Item]:
    """The items of the file (the first ``limit`` of them: detection looks at no more)."""
    if source.is_jsonl:
        return [Item("", line, obj) for line, obj in source.records[:limit]]
    doc = source.records[0][1] if source.records else None
    if isinstance(doc, dict) and isinstance(doc.get("output"), list):  # one Response object
        return [Item(f"output[{k}]", k + 1, v) for k, v in enumerate(doc["output"][:limit])]
    if isinstance(doc, list):
        return [Item(f"[{k}]", k + 1, v) for k, v in enumerate(doc[:limit])]
    return [Item("", 1, doc)]


def detect(source: Source) -> bool:
    """Some item of the first 200 is a Responses item, and none is canonical-only.

    Asked before canonical and openai, which would take a first bare `{"role", "content"}`
    item and then fail on `function_call` or `reasoning`.
    """
    items = _elements(source, 200)  # not an Item per record of a long file
    for it in items:
        obj = it.value
        if isinstance(obj, dict) and (
            (isinstance(obj.get("type"), str) and obj["type"] in _CANONICAL)
            or not _CHAT_KEYS.isdisjoint(obj)
            or obj.get("role") == "tool"
        ):
            return False  # canonical or chat-completions messages, which may hold such blocks
    return any(is_responses_item(it.value) for it in items)


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    yield from read_items(source, _elements(source), skip_invalid)
