from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdiag.errors import UsageError
from memdiag.tokens import TokenCounter, context_size, encoding_name_for, get_encoding
from tests.helpers import tiktoken_cache

TEXTS = [
    "Hello, I'm Mia.",
    "我对花生过敏",
    "naïve café — 12,345 tokens?",
    "",
    "<|endoftext|> is text here",
]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_bundled_ranks_count_like_tiktoken(name, tmp_path, monkeypatch):
    """The bundled rank files give exactly tiktoken's own counts (tiktoken's cache path)."""
    import tiktoken

    ours = TokenCounter(name)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tiktoken_cache(tmp_path / "cache")))
    theirs = tiktoken.get_encoding(name)
    for text in TEXTS:
        assert ours.count(text) == len(theirs.encode(text, disallowed_special=()))
    assert ours.count_many(TEXTS) == [len(theirs.encode_ordinary(t)) for t in TEXTS]


def test_works_offline_without_cache(monkeypatch):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    get_encoding.cache_clear()
    assert TokenCounter("o200k_base").count("hello world") == 2


def test_model_picks_encoding_and_context():
    assert encoding_name_for("gpt-4", None) == "cl100k_base"
    assert encoding_name_for("gpt-4o", None) == "o200k_base"
    assert encoding_name_for("gpt-4o", "cl100k_base") == "cl100k_base"
    assert encoding_name_for(None, None) == "o200k_base"
    assert context_size("gpt-4o-2024-08-06") == 128_000
    assert context_size("gpt-4") == 8_192
    with pytest.raises(UsageError, match="unknown model"):
        encoding_name_for("no-such-model-xyz", None)


def test_unknown_encoding_is_usage_error():
    with pytest.raises(UsageError, match="unknown encoding"):
        get_encoding("p50k_nonexistent")


def test_message_cost_follows_chat_overhead():
    c = TokenCounter()
    base = c.count("user") + c.count("hi there")
    assert c.message_cost("user", "hi there") == 3 + base
    assert c.message_cost("user", "hi there", name="mia") == 3 + base + 1 + c.count("mia")


_PIECES = st.lists(
    st.sampled_from(
        [" ", "  ", "\t", "\n", "\r\n", "a", "Mia", "’s", "12345", "中文", "!?", "é", "\u3000"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(_PIECES, st.text(max_size=40)),
    name=st.sampled_from(["o200k_base", "cl100k_base"]),
)
def test_python_side_split_is_tiktokens_encoding(text: str, name: str) -> None:
    """The split that counts texts tiktoken's regex engine cannot (``_split_in_python``) gives
    tiktoken's own tokens wherever both run: whitespace runs before words, newlines, digits,
    CJK, accents, the ideographic space."""
    from memdiag.tokens import _split_in_python

    counter = TokenCounter(name)
    assert _split_in_python(counter.encoding, text) == counter.encoding.encode_ordinary(text)


@pytest.mark.parametrize("run", [" ", " \t"])
def test_a_million_spaces_are_counted_not_a_panic(run: str) -> None:
    """tiktoken's regex engine panics (a BaseException, printed by Rust to stderr) on a run of
    about a million spaces; memdiag counts such a text with the Python-side split, and a
    shorter run, which tiktoken encodes itself, gives the same count either way."""
    counter = TokenCounter()
    huge = "log:" + run * (1_000_000 // len(run)) + "end"
    assert counter.count(huge) == len(counter.ordinary(huge)) == counter.count_many([huge])[0]
    # just under the threshold tiktoken encodes itself: the split agrees with it
    from memdiag.tokens import LONG_WHITESPACE, _split_in_python

    below = "x" + " " * (LONG_WHITESPACE - 1) + "y"
    assert counter.count(below) == len(_split_in_python(counter.encoding, below))
    # the count grows with the run (no silent zero or truncation)
    assert counter.count(huge) > counter.count("log:" + run * 1000 + "end")


def test_replay_of_a_tool_output_of_a_million_spaces(tmp_path) -> None:
    """The command a user runs: a padded tool output replays (exit 0, no Rust panic on
    stderr) and its tokens are in the window's count."""
    import json
    import os
    import subprocess
    import sys

    path = tmp_path / "padded.jsonl"
    lines = [
        {"role": "user", "content": "I'm allergic to peanuts. Read the log."},
        {"role": "tool", "content": "log:" + " " * 1_000_000 + "end"},
        {"role": "user", "content": "What am I allergic to?"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.run(
        [sys.executable, "-m", "memdiag", "replay", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "panicked" not in proc.stderr and "Traceback" not in proc.stderr
    turns = json.loads(proc.stdout)["strategies"]["sliding_window"]["turns"]
    tool = TokenCounter().count(lines[1]["content"])
    assert tool > 1000 and turns[-1]["tokens"]["messages"] >= tool
