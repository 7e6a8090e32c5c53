"""Auto-detection across the registered formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from memdiag.errors import InputError
from memdiag.transcript import detect_format, load, read_source
from memdiag.transcript import formats as _registry
from memdiag.transcript.formats.base import Selection
from tests.transcript.common import (
    FIXTURES,
    roles,
    write_jsonl,
)

ROOT = Path(__file__).resolve().parents[2]


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
    # docs/reference.md#transcript-input allows Anthropic blocks in canonical content; session
    # lines must keep working
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
    """The registry lists each module of memdiag/transcript/formats/ (but base): none is lost,
    and each module declares the name of its file, a detection priority and examples."""
    import pkgutil

    from memdiag.transcript import formats

    modules = {m.name for m in pkgutil.iter_modules(formats.__path__)} - formats.NOT_FORMATS
    assert set(formats.names()) == modules
    assert list(formats.names()) == sorted(modules)  # help and errors list them sorted
    assert sorted(f.name for f in formats.detection_order()) == sorted(modules)
    for f in formats.formats().values():
        assert isinstance(f.detect_priority, int), f.name
        assert f.examples and all((ROOT / "fixtures" / e).is_file() for e in f.examples), f.name
    order = [f.name for f in formats.detection_order()]
    assert order.index("anthropic") < order.index("openai")
    # a bare first `{"role", "content"}` Responses item would go to canonical or openai
    assert order.index("openai_responses") < order.index("canonical") < order.index("openai")
    # `{"messages": [...]}` of LangChain message dumps is not OpenAI chat
    assert order.index("langchain") < order.index("openai")
    # a trace's message lists would be taken for a chat
    assert max(order.index(n) for n in ("otel", "langsmith", "langfuse", "letta")) < min(
        order.index(n) for n in ("langchain", "anthropic", "canonical", "openai")
    )
    # the constants of older callers are the registry's
    assert formats.formats() == formats.FORMATS
    assert formats.detection_order() == formats.DETECTION_ORDER
    # openai_agents takes any SQLite file (and names the table it lacks): asked last
    assert [f.name for f in formats.PATH_FORMATS] == [
        "claude_code",
        "codex",
        "langgraph",
        "openai_agents",
    ]


EXAMPLES = [(f.name, e) for f in _registry.formats().values() for e in f.examples]


@pytest.mark.parametrize(("name", "example"), EXAMPLES, ids=[e for _, e in EXAMPLES])
def test_every_example_of_every_format_is_detected_as_it(name: str, example: str) -> None:
    """Each registered format's examples are auto-detected as that format and read."""
    path = ROOT / "fixtures" / example
    fmt = _registry.get(name)
    if hasattr(fmt, "detect_path"):
        assert fmt.detect_path(path)
    else:
        assert detect_format(read_source(path)) == name
    # every choice the reader takes (--session, --conversation, --agent): all of them
    chosen = Selection(**{c: "all" for c in getattr(fmt, "selects", {})})
    assert load(path, selection=chosen).format == name


def test_unknown_and_unrecognised_formats_list_the_registry(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"hello": "world"}])
    names = ", ".join(_registry.names())
    assert names.startswith("adk, anthropic, autogen, canonical, chatgpt,")
    with pytest.raises(InputError, match=f"one of: {names} \\(use --from NAME\\)"):
        load(path)
    with pytest.raises(InputError, match=f"unknown format 'yaml'; choose one of: {names}"):
        load(path, "yaml")


def test_from_help_lists_the_registry() -> None:
    from typer.testing import CliRunner

    from memdiag.cli import app

    res = CliRunner().invoke(app, ["convert", "--help"], env={"COLUMNS": "400"})
    assert f"auto-detect): {', '.join(_registry.names())}." in " ".join(res.stdout.split())


def test_a_reader_bug_is_an_internal_error_not_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """load() has no net that turns a reader's KeyError into exit 2: bad input is refused through
    the toolkit (an InputError, exit 2); anything else a reader raises is memdiag's bug (exit 3)."""
    from typer.testing import CliRunner

    from memdiag.cli import app

    sharegpt = _registry.get("sharegpt")
    path = ROOT / "fixtures" / sharegpt.examples[0]

    def broken(source: object, skip_invalid: bool) -> object:
        raise KeyError("value")

    monkeypatch.setattr(sharegpt, "read", broken)
    with pytest.raises(KeyError):
        load(path)
    res = CliRunner().invoke(app, ["convert", str(path)])
    assert res.exit_code == 3
    assert "internal error: KeyError" in res.stderr


def test_a_choice_goes_to_the_readers_that_declare_it() -> None:
    """One selection object for every choice: readers name the ones they take in `selects`;
    load() refuses the others with a usage error, whatever the format."""
    from memdiag.errors import UsageError
    from memdiag.transcript.formats.base import Selection

    taking = {
        f.name: dict(f.selects) for f in _registry.formats().values() if getattr(f, "selects", None)
    }
    assert taking["chatgpt"] == {"conversation": "--conversation"}
    assert taking["openai_agents"] == {"conversation": "--session"}
    sharegpt = ROOT / "fixtures" / _registry.get("sharegpt").examples[0]
    with pytest.raises(UsageError, match="--agent choose among the agents"):
        load(sharegpt, selection=Selection(agent="all"))
    with pytest.raises(UsageError, match="sharegpt files are read whole"):
        load(sharegpt, select="all")
    export = ROOT / "fixtures" / _registry.get("chatgpt").examples[0]
    everything = load(export, selection=Selection(conversation="all"))
    assert everything.format == "chatgpt" and len(everything.sessions) > 1
    first = everything.sessions[0]
    assert load(export, selection=Selection(conversation=first)).sessions == (first,)
