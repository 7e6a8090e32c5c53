"""Instruction files as a memory layer: CLAUDE.md, AGENTS.md, MEMORY.md (docs/coding-agents.md).

A coding agent reads its instruction files whole at every session start (and again after a
compaction): they are the procedural/profile layer. `--memory-file FILE` (repeatable) gives
them to replay and diagnose:

- their text is injected at every turn: its tokens count in the window's `memories` section;
- a fact that one of them states is delivered by that layer (`in_context`);
- their rules (prohibitions, "always", commands to run, strong facts) are read with the
  extractor like any memory, so they can be listed and checked.

Files are read, never written. Core: no typer/rich.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdiag.facts import FUZZY_THRESHOLD, match
from memdiag.fileio import read_text

MAX_BYTES = 4 * 1024**2  # an instruction file is a page or two; a bigger one is not one
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_PROHIBITION = re.compile(
    r"\b(?:never|don'?t|do not|must not|mustn'?t|avoid|no longer|forbidden)\b", re.IGNORECASE
)
_ALWAYS = re.compile(r"\b(?:always|must|make sure|remember to|every time)\b", re.IGNORECASE)
_COMMAND = re.compile(r"`([^`\n]{2,120})`")
# a line that starts with an imperative: an instruction ("Use conventional commits", "Prefer ...")
_IMPERATIVE = re.compile(
    r"^(?:use|run|prefer|keep|write|add|remove|put|follow|ask|check|update|test)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class MemoryRule:
    """One rule of an instruction file, where it is."""

    line: int
    text: str
    kind: str  # prohibition | always | command | instruction | a strong-fact field

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text, "kind": self.kind}


@dataclass(frozen=True)
class MemoryFile:
    path: str
    text: str
    rules: tuple[MemoryRule, ...]

    @property
    def name(self) -> str:
        return Path(self.path).name

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "rules": [r.to_dict() for r in self.rules]}

    def find(self, fact: str) -> tuple[int, str] | None:
        """Where this file states ``fact``: (line, the line's text), best line first; the whole
        file when no single line does (line 0)."""
        best: tuple[float, int, str] | None = None
        for k, raw in enumerate(self.text.splitlines(), 1):
            line = _BULLET.sub("", raw).strip()
            if not line:
                continue
            m = match(fact, line, FUZZY_THRESHOLD)
            if m is not None and (best is None or m.score > best[0]):
                best = (m.score, k, line)
        if best is not None:
            return best[1], best[2]
        if match(fact, self.text, FUZZY_THRESHOLD) is not None:
            return 0, " ".join(self.text.split())[:200]
        return None


def _rules(text: str) -> tuple[MemoryRule, ...]:
    from memdiag.extract import default_extractor

    extractor = default_extractor()
    out: list[MemoryRule] = []
    fenced = False
    for k, raw in enumerate(text.splitlines(), 1):
        if raw.strip().startswith("```"):
            fenced = not fenced
            continue
        line = _BULLET.sub("", raw).strip()
        if not line or line.startswith("#"):
            continue
        if fenced:
            out.append(MemoryRule(k, line, "command"))
        elif _PROHIBITION.search(line):
            out.append(MemoryRule(k, line, "prohibition"))
        elif _ALWAYS.search(line):
            out.append(MemoryRule(k, line, "always"))
        elif _COMMAND.match(line):
            out.append(MemoryRule(k, line, "command"))
        elif _IMPERATIVE.match(line):
            out.append(MemoryRule(k, line, "instruction"))
        else:
            strong = [e for e in extractor.extract(line) if e.strong]
            if strong:
                out.append(MemoryRule(k, line, strong[0].field))
    return tuple(out)


def load_memory_files(paths: Sequence[str | Path]) -> tuple[MemoryFile, ...]:
    """Read the instruction files (UTF-8 text); InputError naming the file when one cannot be."""
    out = []
    for p in paths:
        text = read_text(p, MAX_BYTES, "memory file")
        out.append(MemoryFile(str(p), text, _rules(text)))
    return tuple(out)


def memory_text(files: Sequence[MemoryFile]) -> str:
    """What the agent is given of them at session start: each file whole, headed by its name."""
    return "\n\n".join(f"[{f.name}]\n{f.text.strip()}" for f in files)


def with_memory_files(
    memory: tuple[str, int], files: Sequence[MemoryFile], counter: Any
) -> tuple[str, int]:
    """The injected memories (text, tokens) plus the instruction files."""
    if not files:
        return memory
    text = memory_text(files)
    joined = "\n\n".join(t for t in (memory[0], text) if t)
    return joined, memory[1] + counter.section_cost(text)


def find_in_files(fact: str, files: Sequence[MemoryFile]) -> tuple[MemoryFile, int, str] | None:
    for f in files:
        hit = f.find(fact)
        if hit is not None:
            return f, hit[0], hit[1]
    return None
