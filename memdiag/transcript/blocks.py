"""Content blocks (OpenAI and Anthropic style) → the text the model reads plus metadata."""

from __future__ import annotations

import json
from typing import Any

TEXT_TYPES = {"text", "input_text", "output_text"}


def text_of(content: Any) -> tuple[str, dict[str, Any]]:
    """Return (text, metadata) for a message content: a string or a list of blocks.

    Text blocks are joined with a newline; other blocks (images, files, ...) are kept in
    metadata["blocks"] and do not count as text. Raises ValueError for other types.
    """
    if content is None:
        return "", {}
    if isinstance(content, str):
        return content, {}
    if isinstance(content, list):
        texts: list[str] = []
        other: list[Any] = []
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict) and _block_type(block) in TEXT_TYPES:
                texts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                other.append(drop_nulls(block))
            else:
                raise ValueError(f"content block of type {type(block).__name__}")
        return "\n".join(texts), ({"blocks": other} if other else {})
    raise ValueError(f"expected a string or a list of content blocks, got {type(content).__name__}")


def drop_nulls(value: Any) -> Any:
    """A copy without null-valued keys, recursively: SDK dumps (`model_dump()`) fill every
    optional field with null (refusal, audio, citations, usage details, ...), which say
    nothing and are not copied into the canonical output."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def _block_type(block: dict[str, Any]) -> str | None:
    kind = block.get("type")
    return kind if isinstance(kind, str) else None


def tool_call_text(tool_calls: tuple[dict[str, Any], ...]) -> str:
    """The text that a list of tool calls costs in the window (name + arguments)."""
    parts = []
    for call in tool_calls:
        fn = call.get("function", call)
        args = fn.get("arguments", fn.get("input", ""))
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False, sort_keys=True)
        parts.append(f"{fn.get('name', '')}({args})")
    return "\n".join(parts)
