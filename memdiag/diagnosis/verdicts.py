"""Verdicts of docs/reference.md#verdicts, the failure layer each one falls in, and the frozen
results of diagnose.

A :class:`Diagnosis` carries typed :class:`Details` (one part per decision that ran); its
``to_dict()`` is the JSON of ``memdiag diagnose --format json``, key for key and in the same
order as memdiag 0.1 wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from memdiag.facts import Evidence
from memdiag.stores.memories import Contradiction


class _Name(str, Enum):
    """A closed set of names that read, format and compare as their plain string values."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Verdict(_Name):
    never_stated = "never_stated"
    in_context = "in_context"
    short_term_dropped = "short_term_dropped"
    short_term_summarized_away = "short_term_summarized_away"
    long_term_not_written = "long_term_not_written"
    long_term_not_retrieved = "long_term_not_retrieved"
    long_term_stale = "long_term_stale"
    long_term_not_injected = "long_term_not_injected"
    long_term_unchecked = "long_term_unchecked"


class FailureLayer(_Name):
    """Which memory layer lost the fact ("layer" in the JSON); none: memory is not to blame."""

    none = "none"
    short_term = "short_term"
    long_term = "long_term"


LAYER_OF: dict[Verdict, FailureLayer] = {
    Verdict.never_stated: FailureLayer.none,
    Verdict.in_context: FailureLayer.none,
    Verdict.short_term_dropped: FailureLayer.short_term,
    Verdict.short_term_summarized_away: FailureLayer.short_term,
    Verdict.long_term_not_written: FailureLayer.long_term,
    Verdict.long_term_not_retrieved: FailureLayer.long_term,
    Verdict.long_term_stale: FailureLayer.long_term,
    Verdict.long_term_not_injected: FailureLayer.long_term,
    Verdict.long_term_unchecked: FailureLayer.long_term,
}
VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)
LAYERS: tuple[str, ...] = tuple(x.value for x in FailureLayer)


@dataclass(frozen=True)
class Failure:
    """A fact the agent failed to use at a turn: from a `forgot` marker or from --fact/--at."""

    fact: str
    at_turn: int
    marker_id: str | None = None  # the assistant message carrying the `forgot` marker
    query: str | None = None  # retrieval query; default: the user message of at_turn
    evidence_ids: tuple[str, ...] = ()  # known evidence (benchmark probes); else searched
    probe: dict[str, Any] | None = None  # the benchmark QA item this failure comes from


# --- details: one part per decision -------------------------------------------------------


@dataclass(frozen=True)
class ProbeInfo:
    """The benchmark QA item a failure comes from (values as the dataset gives them)."""

    id: Any
    question: Any
    category: Any
    evidence_ids: Any

    @classmethod
    def of(cls, probe: Mapping[str, Any]) -> ProbeInfo:
        return cls(
            probe.get("id"), probe.get("question"), probe.get("category"), probe.get("evidence_ids")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "category": self.category,
            "evidence_ids": self.evidence_ids,
        }


@dataclass(frozen=True)
class WhatIf:
    """Which strategies keep the fact at the same budget, and the smallest sliding budget."""

    kept_by_strategy: Mapping[str, bool]
    smallest_sliding_window_budget: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept_by_strategy": dict(self.kept_by_strategy),
            "smallest_sliding_window_budget": self.smallest_sliding_window_budget,
        }


@dataclass(frozen=True)
class ShortTermDetails:
    """The replay to the failure turn. ``kept_by`` is set when the fact was in the window."""

    strategy: str
    budget: int
    window_tokens: int
    tokens: Mapping[str, int]
    stated_at_turn: int | None
    kept_by: str | None = None
    conflicting_ids: tuple[str, ...] = ()
    lost_at_turn: int | None = None
    mechanism: str | None = None
    what_if: WhatIf | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "budget": self.budget,
            "window_tokens": self.window_tokens,
            "tokens": dict(self.tokens),
            "stated_at_turn": self.stated_at_turn,
        }
        if self.kept_by is not None:
            out["kept_by"] = self.kept_by
            if self.conflicting_ids:
                out["conflicting_ids"] = list(self.conflicting_ids)
            return out
        out["lost_at_turn"] = self.lost_at_turn
        out["mechanism"] = self.mechanism
        if self.what_if is not None:
            out["what_if"] = self.what_if.to_dict()
        return out


@dataclass(frozen=True)
class FactsFileCheck:
    """The facts-file entry for the fact (profile layer), if any, and how it matched."""

    found: bool
    key: str = ""
    value: str = ""
    match: str = ""  # value | key | key_outdated
    injected_tokens: int = 0
    updated_at: str | None = None  # reported for an outdated key

    def to_dict(self) -> dict[str, Any]:
        if not self.found:
            return {"found": False}
        out: dict[str, Any] = {
            "found": True,
            "key": self.key,
            "value": self.value,
            "match": self.match,
            "injected_tokens": self.injected_tokens,
        }
        if self.match == "key_outdated":
            out["updated_at"] = self.updated_at
        return out


@dataclass(frozen=True)
class VectorStoreCheck:
    """The vector-store record holding the fact, if any."""

    found: bool
    id: str = ""
    collection: str = ""
    document: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if not self.found:
            return {"found": False}
        return {
            "found": True,
            "id": self.id,
            "collection": self.collection,
            "document": self.document,
        }


@dataclass(frozen=True)
class MemoryStoreCheck:
    """A memory-store file (``--store``) as its library retrieves it (docs/stores.md).

    ``retrieved`` is None when memdiag cannot know what the agent asked the library (an MCP
    tool call, a CrewAI task) and was not told; ``rank`` is the record's place in what the
    library returns, when it returns a list; ``delivered`` how many records that is.
    """

    found: bool
    layout: str
    id: str = ""
    document: str | None = None
    retrieved_by: str = ""
    retrieved: bool | None = None
    rank: int | None = None
    delivered: int | None = None
    contradicting: tuple[Contradiction, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        if not self.found:
            return {"found": False, "layout": self.layout}
        out: dict[str, Any] = {
            "found": True,
            "layout": self.layout,
            "id": self.id,
            "document": self.document,
            "retrieved_by": self.retrieved_by,
            "retrieved": self.retrieved,
            "rank": self.rank,
            "delivered": self.delivered,
        }
        if self.contradicting:
            out["contradicting"] = [c.to_dict() for c in self.contradicting]
        return out


@dataclass(frozen=True)
class RankedHit:
    id: str
    rank: int
    distance: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "rank": self.rank, "distance": self.distance}


@dataclass(frozen=True)
class RetrievalCheck:
    """Chroma's own ranking of the fact's record for the failure turn's query."""

    top_k: int
    max_distance: float | None
    rank: int | None
    distance: float | None
    searched: int
    top: tuple[RankedHit, ...]
    contradicting: tuple[Contradiction, ...] = ()  # set when retrieved with stale entries
    inject_max_tokens: int | None = None  # set when the injection budget was checked

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "top_k": self.top_k,
            "max_distance": self.max_distance,
            "rank": self.rank,
            "distance": self.distance,
            "searched": self.searched,
            "top": [h.to_dict() for h in self.top],
        }
        if self.contradicting:
            out["contradicting"] = [c.to_dict() for c in self.contradicting]
        if self.inject_max_tokens is not None:
            out["inject_max_tokens"] = self.inject_max_tokens
        return out


@dataclass(frozen=True)
class LongTermDetails:
    """What the long-term decision checked: stores, query, and what each store holds."""

    evidence_sessions: tuple[str, ...]
    stores_checked: tuple[str, ...] = ()
    query: str | None = None  # None when no store was given
    facts_file: FactsFileCheck | None = None
    vector_store: VectorStoreCheck | None = None
    skipped_reason: str | None = None
    retrieval: RetrievalCheck | None = None
    memory_store: MemoryStoreCheck | None = None  # --store: a memory-store file

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "evidence_sessions": list(self.evidence_sessions),
            "stores_checked": list(self.stores_checked),
        }
        if self.query is not None:
            out["query"] = self.query
        if self.facts_file is not None:
            out["facts_file"] = self.facts_file.to_dict()
        if self.vector_store is not None:
            out["vector_store"] = self.vector_store.to_dict()
        if self.skipped_reason is not None:
            out["skipped_reason"] = self.skipped_reason
        if self.retrieval is not None:
            out["retrieval"] = self.retrieval.to_dict()
        if self.memory_store is not None:
            out["memory_store"] = self.memory_store.to_dict()
        return out


@dataclass(frozen=True)
class ObservedDetails:
    """The recorded request that produced the failing reply (docs/reference.md#observed-windows)
    and what it held."""

    request: str  # id of the reply the request produced
    request_turn: int
    window_ids: tuple[str, ...]
    tokens: int  # recounted exactly
    reported_prompt_tokens: int | None  # what the provider reported, when the trace has it
    source: str | None = None
    tokens_exact: bool = True  # False: an opaque item of unknown size is not in `tokens`
    kept_by: str | None = None
    last_seen_turn: int | None = None
    last_seen_request: str | None = None
    lost_at_turn: int | None = None
    mechanism: str | None = None  # evicted | summarized_away | compacted
    explanation: str | None = None
    what_if: WhatIf | None = None
    what_if_budget: int | None = None  # the agent's own size: its largest request, or --budget
    # a coding agent's compaction that kept or replaced it (docs/coding-agents.md)
    compaction: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {
            "request": self.request,
            "request_turn": self.request_turn,
            "window_ids": list(self.window_ids),
            "tokens": self.tokens,
            "reported_prompt_tokens": self.reported_prompt_tokens,
        }
        if self.source is not None:
            request["source"] = self.source
        if not self.tokens_exact:
            request["tokens_exact"] = False
        if self.last_seen_turn is not None:
            request["last_seen_turn"] = self.last_seen_turn
            request["last_seen_request"] = self.last_seen_request
        out: dict[str, Any] = {"strategy": "observed", "observed": request}
        if self.compaction is not None:
            out["compaction"] = self.compaction
        if self.kept_by is not None:
            out["kept_by"] = self.kept_by
            return out
        out["lost_at_turn"] = self.lost_at_turn
        out["mechanism"] = self.mechanism
        out["explanation"] = self.explanation
        if self.what_if is not None:
            out["what_if"] = {**self.what_if.to_dict(), "budget": self.what_if_budget}
        return out


@dataclass(frozen=True)
class RecordedSearch:
    """A memory search the trace recorded for the failing request, with what came back."""

    query: str
    before: str
    records: tuple[tuple[str, float | None], ...]  # (id, score)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "before": self.before,
            "records": [{"id": i, "score": score} for i, score in self.records],
        }


@dataclass(frozen=True)
class RecordedDetails:
    """What the trace shows of long-term memory at the failure turn
    (docs/reference.md#observed-windows)."""

    request: str
    searches: tuple[RecordedSearch, ...] = ()
    retrieved: tuple[str, ...] = ()  # ids of recorded records that state the fact
    kept_by: str | None = None  # what in the request held it
    explanation: str | None = None
    fresh_query_found: bool | None = None  # with a store: a fresh query retrieves it

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "recorded_retrieval": [s.to_dict() for s in self.searches] or None,
            "recorded_found": bool(self.retrieved),
        }
        if self.retrieved:
            out["retrieved"] = list(self.retrieved)
        if self.kept_by is not None:
            out["kept_by"] = self.kept_by
        if self.explanation is not None:
            out["explanation"] = self.explanation
        if self.fresh_query_found is not None:
            out["fresh_query_found"] = self.fresh_query_found
        return out


@dataclass(frozen=True)
class Details:
    """Everything diagnose looked at; each part is None when its decision did not run."""

    probe: ProbeInfo | None = None
    semantic_search: str | None = None  # "N user sentences compared" | "skipped: why"
    searched: str | None = None  # never stated: what was searched
    short_term: ShortTermDetails | None = None
    long_term: LongTermDetails | None = None
    observed: ObservedDetails | None = None  # judged from a trace's recorded request
    recorded: RecordedDetails | None = None  # long-term, from a trace's recorded searches
    # an instruction file (--memory-file) that states it: the procedural layer delivered it
    memory_file: dict[str, Any] | None = None

    @property
    def lost_at_turn(self) -> int | None:
        if self.observed is not None:
            return self.observed.lost_at_turn
        return self.short_term.lost_at_turn if self.short_term else None

    @property
    def mechanism(self) -> str | None:
        if self.observed is not None:
            return self.observed.mechanism
        return self.short_term.mechanism if self.short_term else None

    @property
    def kept_by(self) -> str | None:
        if self.memory_file is not None:
            return "memory_file"
        if self.observed is not None:
            return self.observed.kept_by
        if self.recorded is not None and self.recorded.kept_by is not None:
            return self.recorded.kept_by
        return self.short_term.kept_by if self.short_term else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.probe is not None:
            out["probe"] = self.probe.to_dict()
        if self.semantic_search is not None:
            out["semantic_search"] = self.semantic_search
        if self.searched is not None:
            out["searched"] = self.searched
        if self.short_term is not None:
            out.update(self.short_term.to_dict())
        if self.long_term is not None:
            out.update(self.long_term.to_dict())
        if self.observed is not None:
            out.update(self.observed.to_dict())
        if self.recorded is not None:
            out.update(self.recorded.to_dict())
        if self.memory_file is not None:
            out["kept_by"] = "memory_file"
            out["memory_file"] = self.memory_file
        return out


@dataclass(frozen=True)
class Outcome:
    """What one decision (short-term or long-term) concluded."""

    verdict: Verdict
    fixes: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Diagnosis:
    fact: str
    at_turn: int
    verdict: Verdict
    flags: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    details: Details = field(default_factory=Details)
    fixes: tuple[str, ...] = ()
    marker_id: str | None = None
    session: str | None = None

    @property
    def layer(self) -> FailureLayer:
        return LAYER_OF[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        """The diagnosis as in ``diagnose --format json`` (docs/reference.md#commands)."""
        return {
            "fact": self.fact,
            "at_turn": self.at_turn,
            "session": self.session,
            "marker_id": self.marker_id,
            "verdict": self.verdict.value,
            "layer": self.layer.value,
            "flags": list(self.flags),
            "evidence": [
                {
                    "id": e.id,
                    "turn": e.turn,
                    "session": e.session,
                    "text": e.text,
                    "score": e.score,
                    "method": e.method,
                    "stated": e.passes,
                    "scores": dict(e.scores),
                }
                for e in self.evidence
            ],
            "details": self.details.to_dict(),
            "fixes": list(self.fixes),
        }
