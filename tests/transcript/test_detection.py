"""Auto-detection across the registered formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from memdiag.errors import InputError
from memdiag.transcript import detect_format, load, read_source
from tests.transcript.common import (
    FIXTURES,
    roles,
    write_jsonl,
)


@pytest.mark.parametrize(("path", "name"), FIXTURES, ids=[n for _, n in FIXTURES])
def test_fixture_is_auto_detected(path: Path, name: str) -> None:
    assert detect_format(read_source(path)) == name
    assert load(path).format == name


def test_openai_messages_are_not_taken_by_anthropic(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "openai.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hey"},
                ]
            },
            {
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "weather?"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "w", "arguments": "{}"},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                ]
            },
        ],
    )
    assert load(path).format == "openai"


def test_anthropic_is_detected_by_blocks_in_a_later_conversation(tmp_path: Path) -> None:
    # no system prompt and plain first conversation: only the tool blocks further on tell
    path = write_jsonl(
        tmp_path / "a.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hey"},
                ]
            },
            {
                "messages": [
                    {"role": "user", "content": "time?"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "id": "tu1", "name": "clock", "input": {}}
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "tu1", "content": "10:00"}
                        ],
                    },
                    {"role": "assistant", "content": "It is 10:00."},
                ]
            },
        ],
    )
    t = load(path)
    assert t.format == "anthropic"
    assert roles(t)[-3:] == ["assistant", "tool", "assistant"]


def test_canonical_jsonl_with_anthropic_blocks_stays_canonical(tmp_path: Path) -> None:
    # SPEC §2 allows Anthropic blocks in canonical content; session lines must keep working
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"type": "session", "id": "a"},
            {"role": "user", "content": "search"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu1", "name": "s", "input": {}}],
            },
        ],
    )
    assert load(path).format == "canonical"


def test_every_format_module_is_registered_once_and_asked_once() -> None:
    """The registry lists each module of memdiag/transcript/formats/ (but base): none is lost."""
    import pkgutil

    from memdiag.transcript import formats

    modules = {m.name for m in pkgutil.iter_modules(formats.__path__)} - {"base"}
    assert set(formats.FORMATS) == modules
    assert sorted(f.name for f in formats.DETECTION_ORDER) == sorted(formats.FORMATS)
    # names in the order that help and errors list them; anthropic is asked before openai
    assert list(formats.FORMATS) == [
        "canonical",
        "openai",
        "anthropic",
        "langchain",
        "sharegpt",
        "locomo",
        "longmemeval",
        "openai_responses",
        "openai_agents",
        "chatgpt",
        "claude",
        "otel",
        "langsmith",
        "langfuse",
        "letta",
        "request_log",
    ]
    order = [f.name for f in formats.DETECTION_ORDER]
    assert order.index("anthropic") < order.index("openai")
    # a bare first `{"role", "content"}` Responses item would go to canonical or openai
    assert order.index("openai_responses") < order.index("canonical") < order.index("openai")
    # `{"messages": [...]}` of LangChain message dumps is not OpenAI chat
    assert order.index("langchain") < order.index("openai")


def test_unknown_and_unrecognised_formats_list_the_registry(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"hello": "world"}])
    names = (
        "canonical, openai, anthropic, langchain, sharegpt, locomo, longmemeval, "
        "openai_responses, openai_agents, chatgpt, claude, otel, langsmith, langfuse, letta, "
        "request_log"
    )
    with pytest.raises(InputError, match=f"one of: {names} \\(use --from NAME\\)"):
        load(path)
    with pytest.raises(InputError, match=f"unknown format 'yaml'; choose one of: {names}"):
        load(path, "yaml")
