"""Assigning stored memories to the seed's five memory tiers (docs/reference.md#stores).

The docs and the JSON output call these the store "layers" (profile, session summary, episodic,
semantic, procedural); in Python they are *tiers*, so that "layer" keeps one meaning: where a
diagnosis failed (none, short_term, long_term).

Metadata decides when it names a tier (``layer``, ``type``, ``kind``, ``memory_type``,
``category``, with synonyms in English and Chinese); otherwise readable content rules do, in this
order: session summary, profile, procedural, episodic, and semantic for everything else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

MemoryTier = Literal["profile", "session_summary", "episodic", "semantic", "procedural"]
TIERS: tuple[MemoryTier, ...] = ("profile", "session_summary", "episodic", "semantic", "procedural")

# Metadata keys that name a tier, checked in this order: `layer` is the most explicit, `category`
# the vaguest.
TIER_KEYS = ("layer", "memory_layer", "memory_type", "type", "kind", "category")

SYNONYMS: dict[MemoryTier, tuple[str, ...]] = {
    "profile": (
        "profile",
        "user_profile",
        "persona",
        "identity",
        "user",
        "user_info",
        "preference",
        "preferences",
        "user_fact",
        "personal",
        "画像",
        "用户画像",
        "档案",
        "个人信息",
        "偏好",
    ),
    "session_summary": (
        "session_summary",
        "summary",
        "conversation_summary",
        "chat_summary",
        "recap",
        "digest",
        "摘要",
        "总结",
        "会话摘要",
        "对话摘要",
    ),
    "episodic": (
        "episodic",
        "episode",
        "event",
        "events",
        "experience",
        "interaction",
        "history",
        "conversation",
        "message",
        "chat",
        "log",
        "情景",
        "情节",
        "事件",
        "经历",
        "对话",
    ),
    "semantic": (
        "semantic",
        "knowledge",
        "fact",
        "facts",
        "concept",
        "note",
        "notes",
        "document",
        "doc",
        "reference",
        "语义",
        "知识",
        "事实",
        "笔记",
    ),
    "procedural": (
        "procedural",
        "procedure",
        "skill",
        "skills",
        "instruction",
        "instructions",
        "workflow",
        "how_to",
        "howto",
        "rule",
        "rules",
        "policy",
        "playbook",
        "程序",
        "流程",
        "技能",
        "步骤",
        "规则",
    ),
}
_BY_SYNONYM = {s: tier for tier, names in SYNONYMS.items() for s in names}


@lru_cache(maxsize=1024)  # label values repeat across a whole collection
def _normalize_label(value: str) -> str:
    v = re.sub(r"[\s\-]+", "_", value.strip().lower())
    # "episodic_memory", "semantic memories", "情景记忆" name the tier plus a generic suffix.
    v = re.sub(r"_?(memory|memories|mem)$", "", v)
    return re.sub(r"记忆$", "", v)


def tier_from_metadata(metadata: Mapping[str, Any] | None) -> MemoryTier | None:
    """The tier named by metadata, or None when no known key holds a known tier name."""
    if not metadata:
        return None
    for key in TIER_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            tier = _BY_SYNONYM.get(_normalize_label(value))
            if tier is not None:
                return tier
    return None


def _rx(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


# Content rules. Each is a list of plain phrases so that adding a language stays easy.
SESSION_SUMMARY = _rx(
    r"^\s*(session |conversation )?(summary|recap)\b",
    r"\bsummary of\b",
    r"\bwe (discussed|talked about|covered|went over)\b",
    r"\bin this (session|conversation)\b",
    r"\bthe (conversation|session) (covered|was about)\b",
    r"会话摘要|对话摘要|本次对话|我们讨论了|我们聊了|总结[:：]",
)
PROFILE = _rx(
    r"^\s*(i am|i'm|my name is|i live|i work|i prefer|i like|i love|i hate|i dislike|"
    r"i was born|i speak|i use|i have an? |i'm allergic|i am allergic|i can't eat|i cannot eat)\b",
    r"^\s*my (name|birthday|wife|husband|partner|kids?|job|email|phone|address|time ?zone|"
    r"favorite|favourite)\b",
    r"^\s*(the )?user('s)? (is|has|likes|loves|prefers|lives|works|was born|name|speaks|"
    r"is allergic|hates|dislikes|uses|birthday|time ?zone|favorite|favourite)\b",
    r"^\s*(the )?user (doesn't|does not|never|can't|cannot)\b",
    r"^\s*(我叫|我是|我住在|我在.{1,12}工作|我喜欢|我不喜欢|我讨厌|我对.{1,12}过敏|我的(名字|生日|时区))",
    r"^\s*用户(叫|是|住在|喜欢|不喜欢|对.{1,12}过敏|的(名字|生日|时区))",
)
PROCEDURAL = _rx(
    r"\bhow to\b",
    r"\b(steps?|step \d+)\b",
    r"\balways (run|use|check|call|ask|start|begin|format|reply|answer|respond)\b",
    r"\b(first|then|finally),? (run|open|click|call|check)\b",
    r"\bmake sure to\b",
    r"\bprocedure\b|\bworkflow\b|\binstructions?\b",
    r"步骤|如何|怎么做|流程|总是先|先.{1,20}再",
)
EPISODIC = _rx(
    r"\blast (time|week|month|year|night|session|visit)\b",
    r"\b(yesterday|earlier today|this morning|ago)\b",
    r"\bon (monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    r"\b(19|20)\d\d-\d\d-\d\d\b",
    r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]* \d{1,2}(st|nd|rd|th)?\b",
    r"\bin (19|20)\d\d\b",
    r"上次|昨天|前天|上周|上个月|去年|那天|\d{1,2}月\d{1,2}[日号]|\d{4}年",
)


def tier_from_content(document: str | None) -> MemoryTier:
    """The tier suggested by the text alone (semantic when no rule matches)."""
    text = (document or "").strip()
    if not text:
        return "semantic"
    if SESSION_SUMMARY.search(text):
        return "session_summary"
    if PROFILE.search(text):
        return "profile"
    if PROCEDURAL.search(text):
        return "procedural"
    if EPISODIC.search(text):
        return "episodic"
    return "semantic"


def assign_tier(document: str | None, metadata: Mapping[str, Any] | None) -> MemoryTier:
    """One of ``TIERS``: from metadata when it names a tier, else from content rules."""
    return tier_from_metadata(metadata) or tier_from_content(document)
