"""Hypothesis strategies that mutate real seed files: structure first, then raw bytes.

Structural mutations parse a seed (JSON, JSON Lines or YAML), then replace, delete, add or
retype values anywhere in it, including values no serializer can write (5,000 levels of
nesting, a 5,000-digit integer, 1e400, NaN, a lone surrogate): those are spliced in as raw text
through placeholders. Byte mutations then may truncate, cut, repeat, flip or insert bytes.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml
from hypothesis import strategies as st

# Strings that have broken memdiag or its renderers, and names its readers look for.
NASTY_TEXT = [
    "[bold",
    "[/]",
    "[link=https://evil.example]click[/link]",
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "\x1b[31mred\x1b[0m",
    "\u202eevil",
    "\x00",
    "",
    " ",
    "user",
    "assistant",
    "tool",
    "system",
    "function",
    "human",
    "gpt",
    "ai",
    "lookup",
    "tool_use",
    "tool_result",
    "text",
    "2024-01-01T00:00:00Z",
    "1e400",
    "-1",
    "99999999999999999999",
    "I'm allergic to peanuts.",
    "My name is Mia.",
    "(?P<value>",
    "(?P<value>a+)+$",
    "../../../../etc/passwd",
    "x" * 5000,
]
FIELD_NAMES = [
    "role",
    "content",
    "tool_calls",
    "function",
    "arguments",
    "name",
    "id",
    "type",
    "text",
    "session",
    "ts",
    "timestamp",
    "forgot",
    "tool_call_id",
    "messages",
    "system",
    "data",
    "conversations",
    "from",
    "value",
    "speaker",
    "dia_id",
    "conversation",
    "haystack_sessions",
    "haystack_dates",
    "haystack_session_ids",
    "question",
    "answer",
    "input",
    "tool_use_id",
    "key",
    "updated_at",
    "source",
    "version",
    "cases",
    "expect",
    "transcript",
    "strategy",
    "budget",
    "kept",
    "lost",
    "at_turn",
    "fact",
    "verdict",
    "defaults",
    "patterns",
    "rules",
    "fields",
    "field",
    "store",
    "audit",
    "model",
    "encoding",
]

RAW_JSON = {
    "deep": "[" * 5000 + "]" * 5000,
    "deep_obj": '{"a":' * 3000 + "1" + "}" * 3000,
    "bigint": "9" * 5000,
    "inf": "1e400",
    "nan": "NaN",
    "neginf": "-Infinity",
    "surrogate": '"a\\ud800b"',
    "surrogate_key": '{"\\udfff": "x"}',
    "tool_fn_str": '[{"function": "lookup"}]',
    "long": json.dumps("word " * 60_000),
}
RAW_YAML = {
    "deep": "[" * 5000 + "]" * 5000,
    "bigint": "9" * 5000,
    "inf": ".inf",
    "nan": ".nan",
    "surrogate": '"a\\ud800b"',
    "date": "2024-01-01",
    "binary": "!!binary aGVsbG8=",
    "set": "!!set {a, b}",
    "alias": "*nowhere",
    "tab": '"a\\tb"',
    "python": "!!python/object:os.system {}",
    "long": "x" * 300_000,
}

text = st.one_of(st.text(max_size=30), st.sampled_from(NASTY_TEXT))
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 10**18, -(10**18), 2**63, 1e308, -1e-308, 0.5]),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
values = st.recursive(
    leaf,
    lambda c: (
        st.lists(c, max_size=3)
        | st.dictionaries(st.one_of(text, st.sampled_from(FIELD_NAMES)), c, max_size=3)
    ),
    max_leaves=6,
)


def _slots(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in ``doc``, iteratively."""
    out: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        for k, v in items:
            out.append((node, k))
            if isinstance(v, (dict, list)):
                stack.append(v)
    return out


@st.composite
def mutated_doc(
    draw: st.DrawFn, seed: Any, raw: dict[str, str], tag: str = "a"
) -> tuple[Any, dict[str, str]]:
    """A deep copy of ``seed`` with 1–4 structural mutations; returns (doc, placeholders)."""
    doc = copy.deepcopy(seed)
    used: dict[str, str] = {}
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(doc) if isinstance(doc, (dict, list)) else []
        op = draw(st.sampled_from(["replace", "raw", "delete", "add", "retype", "swap_root"]))
        if not slots or op == "swap_root":
            if draw(st.booleans()):
                doc = draw(values)
                continue
            slots = slots or []
            if not slots:
                continue
        node, key = draw(st.sampled_from(slots))
        if op == "replace":
            node[key] = draw(values)
        elif op == "raw":
            name = draw(st.sampled_from(sorted(raw)))
            marker = f"@@RAW{tag}{len(used)}@@"
            used[marker] = raw[name]
            node[key] = marker
        elif op == "delete":
            del node[key]
        elif op == "add":
            if isinstance(node, dict):
                node[draw(st.sampled_from(FIELD_NAMES))] = draw(values)
            else:
                node.insert(draw(st.integers(0, len(node))), draw(values))
        elif op == "retype":
            v = node[key]
            node[key] = (
                ([v] if not isinstance(v, list) else {"x": v})
                if draw(st.booleans())
                else str(v)[:200]
            )
    return doc, used


@st.composite
def byte_mutations(draw: st.DrawFn, data: bytes) -> bytes:
    """0–3 byte-level edits of ``data``."""
    for _ in range(draw(st.integers(0, 3))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["truncate", "cut", "repeat", "flip", "insert"]))
        if op == "truncate":
            data = data[:i]
        elif op == "cut":
            data = data[:i] + data[i + draw(st.integers(1, 64)) :]
        elif op == "repeat":
            data = data[:i] + data[i : i + 64] * draw(st.integers(2, 50)) + data[i:]
        elif op == "flip":
            data = data[:i] + bytes([data[i] ^ (1 << draw(st.integers(0, 7)))]) + data[i + 1 :]
        else:
            data = data[:i] + draw(st.binary(min_size=1, max_size=8)) + data[i:]
    return data


def _splice(text: str, used: dict[str, str], quote: str) -> str:
    for marker, raw in used.items():
        text = text.replace(f"{quote}{marker}{quote}", raw).replace(marker, raw)
    return text


@st.composite
def json_file(draw: st.DrawFn, seed_text: str, jsonl: bool) -> bytes:
    """A mutated JSON document or JSON Lines file (bytes) from a real seed."""
    if jsonl:
        docs = [json.loads(ln) for ln in seed_text.splitlines() if ln.strip()]
        used = {}
        for n in range(draw(st.integers(1, 2))):
            k = draw(st.integers(0, len(docs) - 1))
            docs[k], more = draw(mutated_doc(docs[k], RAW_JSON, tag=str(n)))
            used.update(more)
        text = "\n".join(json.dumps(d, ensure_ascii=False) for d in docs) + "\n"
    else:
        doc, used = draw(mutated_doc(json.loads(seed_text), RAW_JSON))
        indent = 2 if draw(st.booleans()) else None
        text = json.dumps(doc, ensure_ascii=False, indent=indent)
    data = _splice(text, used, '"').encode("utf-8")
    return draw(byte_mutations(data)) if draw(st.integers(0, 3)) == 0 else data


@st.composite
def yaml_file(draw: st.DrawFn, seed_text: str) -> bytes:
    """A mutated YAML file (bytes) from a real seed."""
    doc, used = draw(mutated_doc(yaml.safe_load(seed_text), RAW_YAML))
    text = yaml.safe_dump(
        doc, allow_unicode=True, sort_keys=False, default_flow_style=draw(st.booleans())
    )
    text = _splice(text, used, "'")
    if draw(st.integers(0, 9)) == 0:  # an alias bomb ("billion laughs") in front
        bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)
        )
        text = (
            bomb + text if text.lstrip().startswith(tuple("abcdefghijklmnopqrstuvwxyz")) else text
        )
    data = text.encode("utf-8")
    return draw(byte_mutations(data)) if draw(st.integers(0, 3)) == 0 else data
