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


def chain(lines: list[Line]) -> tuple[list[Line], int, int]:
    """The conversation: the parent chain ending at the last line that has a uuid, root
    first (across compactions through `logicalParentUuid`); how many message lines it leaves
    out; and how many parents it did not find in the file (a copy with some lines removed:
    attachments, snapshots), where it went on with the line before in file order."""
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
        if not parent:
            k = None
        elif parent in by_uuid:
            k = by_uuid[parent]
        else:  # the parent's line is not in the file: the line before it is the closest guess
            missing += 1
            k = k - 1 if k > 0 else None
    path.reverse()
    off = sum(
        1
        for ln in linked
        if ln.uuid not in seen and ln.obj.get("type") in MESSAGE_TYPES and not ln.obj.get("isMeta")
    )
    return path, off, missing
