"""Exact token accounting (docs/reference.md#tokens): tiktoken encodings that work offline, chat
overhead.

The cl100k_base and o200k_base rank files ship in ``memdiag/data/tiktoken``, checked against
the hash tiktoken itself pins, so counts are exact with no network. Decoded once, they are kept
in a compact form under the user cache (see ``bundled_ranks``), so a small run starts faster
than tiktoken loading its own cached file.
"""

from __future__ import annotations

import marshal
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from memdiag.collector import collections_paused
from memdiag.errors import InputError, UsageError
from memdiag.transcript.blocks import tool_call_text

if TYPE_CHECKING:
    import tiktoken

    from memdiag.transcript.model import Message

DEFAULT_ENCODING = "o200k_base"
BUNDLED = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

# context sizes of common models (tokens); used when --budget is not given
CONTEXT_SIZES = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "gpt-5": 400_000,
}
DEFAULT_CONTEXT = 128_000


@dataclass(frozen=True)
class ChatOverhead:
    """OpenAI chat format overhead; other providers differ, so every number is configurable."""

    per_message: int = 3
    per_name: int = 1
    reply_priming: int = 3


def context_size(model: str | None) -> int:
    if not model:
        return DEFAULT_CONTEXT
    for name in sorted(CONTEXT_SIZES, key=len, reverse=True):
        if model == name or model.startswith(name + "-"):
            return CONTEXT_SIZES[name]
    return DEFAULT_CONTEXT


def encoding_name_for(model: str | None, encoding: str | None) -> str:
    """--encoding wins; else tiktoken's model map; else o200k_base."""
    if encoding:
        return encoding
    if model:
        import tiktoken.model

        try:
            return tiktoken.model.encoding_name_for_model(model)
        except KeyError:
            raise UsageError(
                f"unknown model {model!r} for tiktoken; pass --encoding o200k_base or cl100k_base"
            ) from None
    return DEFAULT_ENCODING


@lru_cache(maxsize=4)
def get_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding ``name``: bundled ranks through the compact cache, else tiktoken's.

    For the bundled encodings the ranks are the exact bytes tiktoken pins by hash, so where
    they come from changes nothing in the counts; any other encoding goes through
    ``tiktoken.get_encoding`` (which honours ``TIKTOKEN_CACHE_DIR`` as tiktoken documents it).
    """
    import tiktoken

    if name not in BUNDLED:
        try:
            with _offline():
                return tiktoken.get_encoding(name)
        except _WouldDownload:
            raise UsageError(
                f"encoding {name!r} is not bundled with memdiag and not in tiktoken's cache; "
                "memdiag does not download it (no network, docs/reference.md#safety): use "
                "o200k_base or cl100k_base, or put it in TIKTOKEN_CACHE_DIR"
            ) from None
        except ValueError:
            raise UsageError(
                f"unknown encoding {name[:80]!r}; choose one of: {', '.join(sorted(BUNDLED))}"
            ) from None
        except Exception as exc:
            raise InputError(f"cannot load encoding {name[:80]!r}: {exc}") from None
    from tiktoken_ext import openai_public

    # the constructor in tiktoken_ext would download; build the same Encoding from its parts
    template = _spec_without_ranks(getattr(openai_public, name))
    pat_str, special_tokens = template["pat_str"], template["special_tokens"]
    assert isinstance(pat_str, str) and isinstance(special_tokens, dict)
    return tiktoken.Encoding(
        name=name,
        pat_str=pat_str,
        mergeable_ranks=bundled_ranks(name),
        special_tokens=special_tokens,
    )


class _WouldDownload(Exception):
    pass


@contextmanager
def _offline() -> Iterator[None]:
    """tiktoken with its cache only: a rank file it would download raises _WouldDownload."""
    import tiktoken.load

    real = tiktoken.load.read_file

    def read_file(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise _WouldDownload(blobpath)
        return real(blobpath)

    tiktoken.load.read_file = read_file
    try:
        yield
    finally:
        tiktoken.load.read_file = real


def bundled_ranks(name: str) -> dict[bytes, int]:
    """The mergeable ranks of a bundled encoding, from the compact cache when it is sound.

    Decoding the rank file (200,000 base64 lines) costs more than everything else a small run
    does, so the decoded dict is kept as ``marshal`` data under the user cache, keyed by the
    rank file's hash and checked against a hash of its own bytes. Marshal, not pickle: loading
    it can never run code. A missing, stale, corrupt or unwritable cache only costs the decode.
    """
    from memdiag import usercache

    rank_hash = BUNDLED[name]
    path = usercache.entry("tiktoken", f"{name}-{rank_hash[:16]}")
    if path is not None:
        payload = usercache.read_checked(path, rank_hash.encode())
        if payload is not None:
            try:
                with (
                    collections_paused()
                ):  # collections while 200,000 objects appear find no garbage
                    ranks = marshal.loads(payload)
            except (ValueError, EOFError, TypeError):
                ranks = None
            if isinstance(ranks, dict) and len(ranks) > 1000:
                return ranks
    from tiktoken.load import load_tiktoken_bpe

    from memdiag.fileio import shipped_file

    with shipped_file("data", "tiktoken", f"{name}.tiktoken") as rf:
        ranks = load_tiktoken_bpe(str(rf), expected_hash=rank_hash)
    if path is not None:
        usercache.write_checked(path, rank_hash.encode(), marshal.dumps(ranks))
    return ranks


def _spec_without_ranks(spec_fn: Callable[[], dict[str, object]]) -> dict[str, object]:
    """tiktoken_ext's constructor with rank loading stubbed: reuse its regex and specials."""
    from tiktoken_ext import openai_public

    real = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        return spec_fn()
    finally:
        openai_public.load_tiktoken_bpe = real


class TokenCounter:
    """Counts tokens of texts and messages with one encoding and one chat overhead."""

    def __init__(self, encoding: str = DEFAULT_ENCODING, overhead: ChatOverhead | None = None):
        self.encoding_name = encoding
        self.encoding = get_encoding(encoding)
        self.overhead = overhead or ChatOverhead()
        self.role_tokens = {r: self.count(r) for r in ("system", "user", "assistant", "tool")}
        self._sections: dict[str, int] = {}

    def count(self, text: str) -> int:
        # encode_ordinary is tiktoken's encode(text, disallowed_special=()), a little faster
        return len(self.ordinary(text)) if text else 0

    def count_many(self, texts: list[str]) -> list[int]:
        # a plain loop: measured faster than encode_ordinary_batch's thread pool here
        encode = self.encoding.encode_ordinary
        if max(map(len, texts), default=0) >= LONG_WHITESPACE:  # rare: see _long_whitespace
            return [len(self.ordinary(t)) if t else 0 for t in texts]
        return [len(encode(t)) if t else 0 for t in texts]

    def ordinary(self, text: str) -> list[int]:
        """``encoding.encode_ordinary(text)`` (special tokens as plain text), for any text:
        see ``_split_in_python``."""
        if len(text) >= LONG_WHITESPACE and _long_whitespace(text):
            return _split_in_python(self.encoding, text)
        try:
            return self.encoding.encode_ordinary(text)
        except BaseException as exc:  # a Rust panic is no Exception
            if not _regex_overflow(exc):
                raise
        return _split_in_python(self.encoding, text)

    def message_cost(self, role: str, content: str, name: str | None = None) -> int:
        """Tokens one message takes in the window (OpenAI chat format)."""
        cost = self.overhead.per_message + self.count(role) + self.count(content)
        if name:
            cost += self.overhead.per_name + self.count(name)
        return cost

    def section_cost(self, text: str) -> int:
        """A pinned section (scratchpad, summary, memories) rendered as one system message."""
        if not text:
            return 0
        # a summarizer checks the text it returns and the strategy then sets it: count once
        cost = self._sections.get(text)
        if cost is None:
            if len(self._sections) >= 8:
                self._sections.clear()
            cost = self._sections[text] = self.message_cost("system", text)
        return cost

    def remember_section(self, text: str, cost: int) -> None:
        """Record ``section_cost(text)`` computed by a caller that knows it exactly."""
        if len(self._sections) >= 8:
            self._sections.clear()
        self._sections[text] = cost

    def message_costs(self, messages: tuple[Message, ...] | list[Message]) -> list[int]:
        """Cost of every message, each encoded exactly once (batched)."""
        texts = [_message_text(m) for m in messages]
        content = self.count_many(texts)
        roles = self.role_tokens
        costs = []
        for m, n in zip(messages, content, strict=True):
            cost = self.overhead.per_message + roles.get(m.role, 0) + n
            if m.name:
                cost += self.overhead.per_name + self.count(m.name)
            costs.append(cost)
        return costs


# texts with a whitespace run this long are split by the `regex` module (_split_in_python):
# tiktoken's engine panics at about a million (_regex_overflow), far above this
LONG_WHITESPACE = 100_000
_WHITESPACE_RUN = re.compile(r"\s+")


def _long_whitespace(text: str) -> bool:
    """Whether ``text`` holds a run of at least LONG_WHITESPACE whitespace characters (each
    run is matched once: linear in the text)."""
    return any(m.end() - m.start() >= LONG_WHITESPACE for m in _WHITESPACE_RUN.finditer(text))


def _regex_overflow(exc: BaseException) -> bool:
    """Whether ``exc`` is tiktoken's regex engine giving up on a long run of whitespace.

    Its pattern's ``\\s+(?!\\S)`` backtracks once per character of the run, and a run of
    about a million spaces or tabs (a padded tool output, a blank buffer) overflows the
    engine's stack: a Rust panic, raised as pyo3's ``PanicException``, a BaseException that
    no ``except Exception`` catches (measured with tiktoken 0.14: 800,000 spaces encode,
    1,000,000 panic)."""
    return type(exc).__name__ == "PanicException"


def _split_in_python(encoding: tiktoken.Encoding, text: str) -> list[int]:
    """The tokens of ``text`` with the encoding's pattern run by the ``regex`` module instead
    of tiktoken's own engine, each piece then encoded alone: what ``encode_ordinary`` does
    (tiktoken's ``_encode_only_native_bpe``; a property test holds the two equal where both
    run). 1,000,000 spaces take about a second."""
    split = getattr(encoding, "_encode_only_native_bpe", None)
    if split is None:  # a tiktoken without it: say what cannot be counted, in one line
        raise InputError(
            f"a text of {len(text):,} characters holds a whitespace run longer than tiktoken's "
            "regex engine can encode, and this tiktoken has no Python-side split to count it"
        )
    try:
        return list(split(text))
    except UnicodeEncodeError:  # a lone surrogate: replaced, as tiktoken's encode does
        return list(split(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))


def _message_text(m: Message) -> str:
    """What a message costs: its content, plus its tool calls (name and arguments)."""
    text = m.content
    if m.tool_calls:
        calls = tool_call_text(m.tool_calls)
        text = f"{text}\n{calls}" if text else calls
    return text


def truncate_to_tokens(counter: TokenCounter, text: str, max_tokens: int) -> str:
    """Cut ``text`` at the end so that ``counter.section_cost(text) <= max_tokens``."""
    if counter.section_cost(text) <= max_tokens:
        return text
    room = max_tokens - counter.section_cost("x") + counter.count("x")  # overhead of the section
    if room <= 0:
        return ""
    tokens = counter.ordinary(text)
    n = min(room, len(tokens))
    while n > 0:
        # a cut can split a multi-byte character; re-encoding the decoded text may then differ
        cut = counter.encoding.decode(tokens[:n], errors="ignore").rstrip()
        if cut and counter.section_cost(cut) <= max_tokens:
            return cut
        n -= 1
    return ""
