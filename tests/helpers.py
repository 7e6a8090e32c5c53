"""Test helpers: an independent token count and window reconstruction from replay deltas."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from memdiag.transcript.model import Transcript

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
