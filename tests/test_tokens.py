from __future__ import annotations

import pytest

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
