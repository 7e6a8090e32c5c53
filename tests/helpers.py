"""Test helpers: an independent token count and window reconstruction from replay deltas."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from memdiag.replay import StrategyReplay
from memdiag.transcript.model import RawMessage, RawSession, RawSummary, Transcript, build

RANKS = Path(__file__).resolve().parent.parent / "memdiag" / "data" / "tiktoken"
URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}


def tiktoken_cache(tmp: Path) -> Path:
    """A TIKTOKEN_CACHE_DIR laid out as tiktoken documents it (sha1 of the download URL)."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name, url in URLS.items():
        shutil.copy(RANKS / f"{name}.tiktoken", tmp / hashlib.sha1(url.encode()).hexdigest())
    return tmp


def independent_cost(enc, message: dict) -> int:  # type: ignore[no-untyped-def]
    """OpenAI's documented chat count for one message: 3 + role + content (+1 + name)."""
    text = message.get("content") or ""
    calls = message.get("tool_calls") or []
    if calls:
        parts = [f"{c['function']['name']}({c['function']['arguments']})" for c in calls]
        text = (text + "\n" if text else "") + "\n".join(parts)
    n = 3 + len(enc.encode(message["role"])) + len(enc.encode(text))
    if message.get("name"):
        n += 1 + len(enc.encode(message["name"]))
    return n


def raw_lines(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def windows_from_deltas(turns: list[dict]) -> list[list[str]]:
    """Rebuild the verbatim window at every turn from entered/evicted/summarized deltas."""
    window: list[str] = []
    out = []
    for t in turns:
        gone = set(t.get("dropped_by_session", ())) | set(t["evicted"]) | set(t["summarized"])
        window = [i for i in window if i not in gone] + [i for i in t["entered"] if i not in gone]
        out.append(list(window))
    return out


def orphan_tools(transcript: Transcript, window_ids: list[str]) -> list[str]:
    """Tool results without their call, or calls without their results, in a window."""
    present = set(window_ids)
    by_id = {m.id: m for m in transcript.messages}
    calls = {cid: m.id for m in transcript.messages for cid in m.tool_call_ids}
    answered = {m.tool_call_id for m in transcript.messages if m.role == "tool"}
    problems = []
    for mid in window_ids:
        m = by_id[mid]
        if m.role == "tool" and m.tool_call_id in calls and calls[m.tool_call_id] not in present:
            problems.append(mid)
        if m.role == "assistant":
            for cid in m.tool_call_ids:
                results = [r.id for r in transcript.messages if r.tool_call_id == cid]
                if cid in answered and not all(r in present for r in results):
                    problems.append(mid)
    return problems


# --- generated transcripts (hypothesis) --------------------------------------------------

WORDS = st.sampled_from(
    [
        *[
            "I",
            "am",
            "allergic",
            "to",
            "peanuts",
            ".",
            "window",
            "seat",
            "Lisbon",
            "never",
            "book",
            "red-eye",
            "flights",
        ],
        *[
            "42",
            "euros",
            "!",
            "我",
            "对",
            "花生",
            "过敏",
            "。",
            "hotel",
            "museum",
            "tomorrow",
            "prefer",
            "call",
            "me",
            "Mia",
        ],
        *["my", "name", "is", "Tom", "I'm"],
    ]
)
TEXT = st.lists(WORDS, min_size=1, max_size=30).map(" ".join)


@st.composite
def transcripts(draw: st.DrawFn) -> Transcript:
    items: list[Any] = [RawMessage("system", draw(TEXT))]
    call = 0
    for t in range(draw(st.integers(1, 25))):
        if t and draw(st.integers(0, 9)) == 0:
            items.append(RawSession(f"s{t}"))
        items.append(RawMessage("user", draw(TEXT)))
        if draw(st.booleans()):
            call += 1
            cid = f"c{call}"
            args = draw(TEXT)
            fn = {"id": cid, "function": {"name": "lookup", "arguments": args}}
            items.append(RawMessage("assistant", "", tool_calls=(fn,)))
            for _ in range(draw(st.integers(1, 2))):
                items.append(RawMessage("tool", draw(TEXT), tool_call_id=cid))
        items.append(RawMessage("assistant", draw(TEXT)))
        if draw(st.integers(0, 5)) == 0:
            items.append(RawSummary(draw(TEXT)))  # covers everything before it
    return build(items, path="<generated>", format="canonical")


def windows(transcript: Transcript, res: StrategyReplay) -> Iterator[tuple[Any, list[int]]]:
    """The verbatim window at every turn, rebuilt from the per-turn deltas only."""
    index = {m.id: m.index for m in transcript.messages}
    window: list[int] = []
    for r in res.turns:
        gone = {index[i] for i in (*r.evicted, *r.summarized, *r.dropped_by_session)}
        window = [i for i in window if i not in gone]
        window += [index[i] for i in r.entered if index[i] not in gone]
        yield r, window


@contextlib.contextmanager
def watchdog(seconds: int, what: str) -> Iterator[None]:
    """Fail (AssertionError) when the block runs longer than ``seconds``, instead of hanging
    the suite: for inputs an earlier version took hours on (a regex that backtracked). A
    bound far above the run's real time, not a timing claim. Skips where there is no SIGALRM.
    """
    import signal

    import pytest

    if not hasattr(signal, "SIGALRM"):
        pytest.skip("the watchdog needs SIGALRM (not on Windows)")

    def hung(*_: object) -> None:
        raise AssertionError(f"{what} took over {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
