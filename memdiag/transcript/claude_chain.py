"""The conversation of a Claude Code session: its lines by agent, and the chain of `uuid` →
`parentUuid` links through them (docs/coding-agents.md). Used by the ``claude_code`` format.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdiag.transcript.source import Source, read_source

MAIN = "main"
MESSAGE_TYPES = ("user", "assistant")


def is_record(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("type"), str)
        and ("sessionId" in obj or "parentUuid" in obj)
        and isinstance(obj.get("uuid", ""), str)
    )


@dataclass
class Line:
    line: int
    obj: dict[str, Any]

    @property
    def uuid(self) -> str | None:
        value = self.obj.get("uuid")
        return value if isinstance(value, str) and value else None

    @property
    def parent(self) -> str | None:
        value = self.obj.get("parentUuid")
        if not value and self.obj.get("subtype") == "compact_boundary":
            value = self.obj.get("logicalParentUuid")
        return value if isinstance(value, str) and value else None


def agent_of(obj: dict[str, Any]) -> str:
    if not obj.get("isSidechain"):
        return MAIN
    agent = obj.get("agentId")
    return f"agent-{agent}" if isinstance(agent, str) and agent else "sidechain"


def subagent_files(source: Source) -> list[Path]:
    """`<session>/subagents/*.jsonl` beside the session file (Claude Code 2.1), or older
    `agent-*.jsonl` files beside it that belong to the same session."""
    here = Path(source.path)
    if not here.is_file():
        return []
    found = sorted((here.parent / here.stem / "subagents").glob("*.jsonl"))
    if not found and not here.name.startswith("agent-"):
        sid = here.stem
        for f in sorted(here.parent.glob("agent-*.jsonl")):
            try:
                with f.open("rb") as fp:
                    first = fp.read(4096)  # the sessionId is in the first line's first bytes
            except OSError:
                continue
            if sid.encode() in first:
                found.append(f)
    return found


def agents(source: Source) -> dict[str, list[Line]]:
    """The lines of every agent: the file's own (main and sidechains) and its subagent files."""
    out: dict[str, list[Line]] = {}
    for line, obj in source.records:
        if is_record(obj):
            out.setdefault(agent_of(obj), []).append(Line(line, obj))
    for f in subagent_files(source):
        sub = read_source(f)
        for line, obj in sub.records:
            if is_record(obj):
                key = agent_of(obj) if obj.get("isSidechain") else f"agent-{f.stem}"
                key = key if key != "sidechain" else f.stem
                out.setdefault(key, []).append(Line(line, obj))
    return out


def chain(lines: list[Line], outside: frozenset[str] = frozenset()) -> tuple[list[Line], int, int]:
    """The conversation: the parent chain ending at the last line that has a uuid, root
    first (across compactions through `logicalParentUuid`), with the parallel tool calls and
    results that hang beside it (:func:`_beside`); how many message lines it leaves out; and
    how many parents it did not find in the file (a copy with some lines removed:
    attachments, snapshots), where it went on with the line before in file order.

    ``outside``: the uuids of the main conversation, for a subagent's lines. A parent there
    is where the agent forked from it (a compaction's summarizer, `agent-acompact-*`, starts
    at the main conversation's last line): the chain's root, not a missing line."""
    linked = [ln for ln in lines if ln.uuid]
    if not linked:
        return [], 0, 0
    by_uuid = {ln.uuid: k for k, ln in enumerate(linked)}
    k: int | None = len(linked) - 1
    path: list[Line] = []
    seen: set[str] = set()
    missing = 0
    while k is not None:
        ln = linked[k]
        uid = ln.uuid
        if uid is None or uid in seen:
            break
        seen.add(uid)
        path.append(ln)
        parent = ln.parent
        if not parent or parent in outside:
            k = None
        elif parent in by_uuid:
            k = by_uuid[parent]
        else:  # the parent's line is not in the file: the line before it is the closest guess
            # a compact_boundary's logicalParentUuid may name a line Claude Code never wrote
            # (2.1.39 does so on auto-compaction): not a sign of a trimmed file
            if ln.obj.get("subtype") != "compact_boundary":
                missing += 1
            k = k - 1 if k > 0 else None
    path.reverse()
    beside = _beside(path, [ln for ln in linked if ln.uuid not in seen])
    if beside:
        seen.update(str(ln.uuid) for ln in beside)
        path = sorted([*path, *beside], key=lambda ln: ln.line)
    off = sum(
        1
        for ln in linked
        if ln.uuid not in seen
        and ln.obj.get("type") in MESSAGE_TYPES
        and not ln.obj.get("isMeta")
        and ln.parent not in outside
    )
    return path, off, missing


def _message_id(ln: Line) -> str | None:
    msg = ln.obj.get("message")
    mid = msg.get("id") if isinstance(msg, dict) else None
    return mid if isinstance(mid, str) and mid else None


def _blocks_of(ln: Line, kind: str) -> list[dict[str, Any]]:
    msg = ln.obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _ids(ln: Line, kind: str, key: str) -> set[Any] | None:
    """The ids (``key``) of a line's ``kind`` blocks as the file gives them; None when one of
    them is a list or an object (a damaged line: it names no call)."""
    out = set()
    for b in _blocks_of(ln, kind):
        i = b.get(key)
        if isinstance(i, (list, dict)):
            return None
        out.add(i)
    return out


def _beside(path: list[Line], rest: list[Line]) -> list[Line]:
    """The lines off the chain that are part of it: Claude Code writes one reply with parallel
    tool calls as one line per `tool_use` (sharing `message.id`) and each result as a line
    whose parent is its own `tool_use` line, with hook `progress` lines between, so that the
    chain from the last line passes through only some of them. A line of a reply on the chain
    (same `message.id`), and a `tool_result` line answering a `tool_use` of the chain that the
    chain does not answer, were in the request; a rewound or retried branch is neither (its
    reply has another id, its results answer its own calls)."""
    replies = {mid for ln in path if ln.obj.get("type") == "assistant" and (mid := _message_id(ln))}
    parts = [ln for ln in rest if ln.obj.get("type") == "assistant" and _message_id(ln) in replies]
    calls = set().union(*(_ids(ln, "tool_use", "id") or () for ln in (*path, *parts)))
    answered = set().union(*(_ids(ln, "tool_result", "tool_use_id") or () for ln in path))
    results = []
    for ln in rest:
        if ln.obj.get("type") != "user":
            continue
        ids = _ids(ln, "tool_result", "tool_use_id")
        if ids and ids <= calls and not ids & answered:
            results.append(ln)
            answered |= ids
    return [*parts, *results]


# the agent file of a compaction's summarizer: `<session>/subagents/agent-acompact-<id>.jsonl`
SUMMARIZER = "agent-acompact-"


def describe(name: str, lines: list[Line]) -> str:
    """An agent as a listing names it: `agent-acompact-946d2b (2 lines, a compaction's
    summarizer)`."""
    what = ", a compaction's summarizer" if name.startswith(SUMMARIZER) else ""
    return f"{name} ({len(lines)} lines{what})"


def prompt_size(usage: Any) -> int | None:
    """A request's real prompt size from its reply's `usage`: input + cache creation + cache
    read tokens."""
    if not isinstance(usage, dict):
        return None
    return sum(
        v
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        if isinstance(v := usage.get(k), int) and not isinstance(v, bool)
    )


@dataclass(frozen=True)
class Summarizer:
    """A compaction's summarizer call, as its agent file recorded it: Claude Code 2.1 sends the
    conversation so far plus a summarization prompt as one request (the file holds the prompt
    and the reply; its parent is the main conversation's last line)."""

    agent: str
    ts: str | None  # of its reply
    prompt_tokens: int | None  # the request's size, as the provider reported it

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"agent": self.agent}
        if self.prompt_tokens is not None:
            out["prompt_tokens"] = self.prompt_tokens
        return out


def summarizers(by_agent: dict[str, list[Line]]) -> list[Summarizer]:
    """The summarizer agents of a session, in the order of their replies."""
    out = []
    for name, lines in by_agent.items():
        if not name.startswith(SUMMARIZER):
            continue
        replies = [ln for ln in lines if ln.obj.get("type") == "assistant"]
        if not replies:
            continue
        last = replies[-1].obj
        msg = last.get("message")
        usage = msg.get("usage") if isinstance(msg, dict) else None
        ts = last.get("timestamp")
        # (its `output_tokens` is the streaming start's count, not the reply's: left out)
        out.append(Summarizer(name, ts if isinstance(ts, str) else None, prompt_size(usage)))
    return sorted(out, key=lambda s: s.ts or "")


def summarizer_of(
    found: list[Summarizer], boundary_ts: str | None, after: str | None
) -> Summarizer | None:
    """The summarizer of the compaction written at ``boundary_ts`` (the previous one at
    ``after``): the last whose reply came before the boundary and after the previous one."""
    if boundary_ts is None:
        return None
    fits = [s for s in found if s.ts and s.ts <= boundary_ts and (after is None or s.ts > after)]
    return fits[-1] if fits else None
