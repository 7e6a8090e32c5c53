"""Step 3 of docs/reference.md#verdicts: the fact was stated only in earlier sessions, so long-term
memory had to carry it: the facts file (profile layer), the vector stores (write → retrieve →
inject) and the memory-store files (write → the library's own retrieval).

The facts file is read by exact key and injected whole at every session start. A vector
store (Chroma, Qdrant, LanceDB: any ``retrieval.VectorStore``): was the fact written, does the
query at the failure turn rank it within top_k, does an older or contradicting entry come with
it, and does it survive the injection budget? Every rank and distance is the store's own; when
no embedding function can run, the retrieval check is reported as skipped — never guessed. A
memory-store file is retrieved as its library does (``store_files``). ``LongTermStores.queried``
lists the stores in order; ``_check_store`` is the one place that picks the check for a store.
Each check returns its verdict; nothing is mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from memdiag.diagnosis.store_files import Asked
from memdiag.diagnosis.verdicts import (
    Contradiction,
    FactsFileCheck,
    LongTermDetails,
    MemoryStoreCheck,
    Outcome,
    RankedHit,
    RetrievalCheck,
    VectorStoreCheck,
    Verdict,
)
from memdiag.facts import match

if TYPE_CHECKING:
    from memdiag.config import Settings
    from memdiag.stores.chroma import Hit, MemoryRecord
    from memdiag.stores.facts_file import FactEntry, FactsFile
    from memdiag.stores.open import LongTermStores
    from memdiag.stores.retrieval import UserNames
    from memdiag.tokens import TokenCounter

# how deep to look for the fact's own rank when it is not within top_k
RANK_SEARCH_DEPTH = 200

NO_STORE_FIXES = (
    "Stated in an earlier session and no long-term store was given, so nothing carried it "
    "over: long-term memory was never built for this. Write strong facts to a facts file "
    "(exact key lookup) at the end of each session; check with --facts-file / --chroma.",
    "No rewording of the prompt will bring it back: fix the write path first.",
)


@dataclass(frozen=True)
class _VectorResult:
    """One store's check: a vector store's (``found``...) or a memory-store file's."""

    outcome: Outcome | None  # None: not in the store
    found: VectorStoreCheck | None
    skipped_reason: str | None = None
    retrieval: RetrievalCheck | None = None
    memory: MemoryStoreCheck | None = None


def decide_long_term(
    fact: str,
    query: str | None,
    evidence: Sequence[str],
    evidence_sessions: Sequence[str],
    stores: LongTermStores | None,
    settings: Settings,
    counter: TokenCounter,
    at_turn: int,
    agent_query: str | None = None,
    user_names: UserNames | None = None,
) -> tuple[Outcome, LongTermDetails]:
    """The verdict for a fact stated (``evidence``) only in sessions before the failure's.

    ``agent_query`` is what the agent itself asked its memory, when known (``store.query``, a
    search the transcript recorded): an MCP memory graph and CrewAI's long-term memory are read
    by the agent's own call, which the failure turn's message does not say. ``user_names``
    gives the names the user gave in the transcript, for stores that name people but not the
    user (``retrieval.locate``).
    """
    sessions = tuple(evidence_sessions)
    if stores is None or stores.empty:
        return (
            Outcome(Verdict.long_term_not_written, NO_STORE_FIXES, ("no_store_checked",)),
            LongTermDetails(sessions),
        )
    assert query is not None
    checked = tuple(stores.checked())
    strong = _is_strong(fact, list(evidence))
    facts_check = None
    if stores.facts is not None:
        in_facts, facts_check = _facts_file(stores, fact, list(evidence), counter, settings)
        if in_facts is not None:
            return in_facts, LongTermDetails(sessions, checked, query, facts_check)
    results = [
        _check_store(
            store,
            collection,
            Asked(fact, agent_query, at_turn, user_names),
            query,
            counter,
            settings,
        )
        for store, collection in stores.queried()
    ]
    # the first store that holds it gives the verdict, unless another one delivers it
    held = [r for r in results if r.outcome is not None]
    chosen = next((r for r in held if r.outcome.verdict is Verdict.in_context), None)  # type: ignore[union-attr]
    chosen = chosen or (held[0] if held else None)
    vector = chosen if chosen is not None and chosen.found is not None else None
    vector = vector or next((r for r in results if r.found is not None), None)
    document = chosen if chosen is not None and chosen.memory is not None else None
    document = document or next((r for r in results if r.memory is not None), None)
    details = LongTermDetails(
        sessions,
        checked,
        query,
        facts_check,
        vector.found if vector else None,
        vector.skipped_reason if vector else None,
        vector.retrieval if vector else None,
        document.memory if document else None,
    )
    if chosen is not None and chosen.outcome is not None:
        out = chosen.outcome
        if strong:
            # a memory-store file is searched by its library's rule, a vector store by
            # similarity: neither is the exact key lookup a zero-tolerance fact needs
            by_file = chosen.memory is not None and chosen.found is None
            how = chosen.memory.retrieved_by if by_file else "vector similarity"  # type: ignore[union-attr]
            out = Outcome(
                out.verdict,
                (
                    *out.fixes,
                    "This is a strong fact (zero tolerance): keep it in the facts file and read "
                    f"it by exact key, not only by {how}.",
                ),
                (
                    *out.flags,
                    "strong_fact_in_memory_store" if by_file else "strong_fact_in_vector_store",
                ),
            )
        return out, details
    return (
        Outcome(
            Verdict.long_term_not_written,
            (
                "Long-term memory was never built for this: no store holds it "
                f"({'; '.join(checked)}). Add a write path: extract facts at session "
                "end and "
                + (
                    "save this strong fact by key in the facts file."
                    if strong
                    else "embed them into the store."
                ),
                "No rewording of the prompt will bring it back.",
            ),
        ),
        details,
    )


def _check_store(
    store: Any,
    collection: str | None,
    asked: Asked,
    query: str,
    counter: TokenCounter,
    settings: Settings,
) -> _VectorResult:
    """One store's verdict: a vector store (Chroma, Qdrant, LanceDB: anything with ``query``) is
    queried by vector; a memory-store file is retrieved as its library does (``store_files``).
    The one place that picks the check: a new vector reader needs only ``query``."""
    from memdiag.stores.retrieval import VectorStore

    if isinstance(store, VectorStore):
        return _vector_store(store, collection, asked, query, counter, settings)
    from memdiag.diagnosis.store_files import decide_store_file

    outcome, check = decide_store_file(store, asked, settings)
    return _VectorResult(outcome, None, memory=check)


def _facts_file(
    stores: LongTermStores,
    fact: str,
    evidence: list[str],
    counter: TokenCounter,
    settings: Settings,
) -> tuple[Outcome | None, FactsFileCheck]:
    assert stores.facts is not None
    found = _facts_entry(stores.facts, fact, evidence)
    if found is None:
        return None, FactsFileCheck(False)
    entry, how = found
    budget = settings.store.inject_max_tokens
    injected, tokens = stores.injected_profile(counter, budget)
    check = FactsFileCheck(True, entry.key, entry.value, how, tokens, entry.updated_at)
    if how == "key_outdated":
        return Outcome(
            Verdict.long_term_stale,
            (
                f"The facts file holds an outdated value for {entry.key!r} ({entry.value!r}): "
                "update the key when the user states a new value (write path), and keep history "
                "out of what is injected.",
            ),
        ), check
    if entry not in injected:
        return Outcome(
            Verdict.long_term_not_injected,
            (
                f"{entry.key!r} is in the facts file but the profile injection budget "
                f"(inject_max_tokens={budget}) cut it: raise the budget "
                "or order strong facts first.",
            ),
        ), check
    return Outcome(
        Verdict.in_context,
        (
            f"The facts file delivered it ({entry.key}: {entry.value}) at session start: memory "
            "worked. Look at the prompt and the model.",
        ),
    ), check


def _vector_store(
    chroma: Any,  # a retrieval.VectorStore: ChromaStore, QdrantStore, LanceStore
    collection: str | None,
    asked: Asked,
    query: str,
    counter: TokenCounter,
    settings: Settings,
) -> _VectorResult:
    from memdiag.stores.retrieval import find_in_store

    fact, at_turn = asked.fact, asked.at_turn
    records = find_in_store(chroma, collection, fact, user_names=asked.user_names)
    if not records:
        return _VectorResult(None, VectorStoreCheck(False))
    record = records[0]
    found = VectorStoreCheck(True, record.id, record.collection, record.document)
    top_k = settings.store.top_k
    ef, reason = chroma.embedding_function(record.collection)
    if ef is None:
        from memdiag.stores.embeddings import MISSING

        fix = (  # the reason itself stays in skipped_reason; the model is named once per run
            "Retrieval was not checked without the embedding model: install it and run again."
            if reason == MISSING
            else f"Retrieval was not checked: {reason}"
        )
        return _VectorResult(Outcome(Verdict.long_term_unchecked, (fix,)), found, reason)
    count = chroma.collection_info(record.collection).count
    hits = chroma.query(record.collection, query, min(count, max(top_k, RANK_SEARCH_DEPTH)))
    wanted = {r.id for r in records if r.collection == record.collection}
    own = next((h for h in hits if h.id in wanted), None)
    max_distance = settings.store.max_distance
    retrieval = RetrievalCheck(
        top_k=top_k,
        max_distance=max_distance,
        rank=own.rank if own else None,
        distance=round(own.distance, 6) if own else None,
        searched=len(hits),
        top=tuple(RankedHit(h.id, h.rank, round(h.distance, 6)) for h in hits[:top_k]),
    )
    retrieved = (
        own is not None
        and own.rank <= top_k
        and (max_distance is None or own.distance <= max_distance)
    )
    if not retrieved:
        where = (
            f"rank {own.rank}, distance {own.distance:.3f}"
            if own
            else f"not in the first {len(hits)} results"
        )
        fix = (
            f"Stored as {record.id} but the query at turn {at_turn} does not retrieve it "
            f"({where}; top_k={top_k}"
            + (f", max_distance={max_distance}" if max_distance is not None else "")
            + "). Fix retrieval: rewrite the query (include the topic, e.g. food/diet), raise "
            "top_k, add metadata filters, or read strong facts by exact key instead."
        )
        return _VectorResult(
            Outcome(Verdict.long_term_not_retrieved, (fix,)), found, retrieval=retrieval
        )
    assert own is not None
    stale = _contradicting(fact, record, hits[:top_k], wanted)
    if stale:
        outranks = [s.id for s in stale if s.rank < own.rank]
        fix = (
            "Retrieved together with contradicting entries "
            f"({', '.join(s.id for s in stale)}"
            + (f"; {', '.join(outranks)} outrank it" if outranks else "")
            + "): maintain the store — delete or merge superseded entries on write, and "
            "prefer the newest by timestamp when injecting."
        )
        return _VectorResult(
            Outcome(Verdict.long_term_stale, (fix,)),
            found,
            retrieval=replace(retrieval, contradicting=tuple(stale)),
        )
    budget = settings.store.inject_max_tokens
    cut = False
    for h in hits[:top_k]:
        injected = counter.section_cost("\n".join(x.document or "" for x in hits[: h.rank]))
        if injected > budget and h.rank <= own.rank:
            cut = True
            break
    retrieval = replace(retrieval, inject_max_tokens=budget)
    if cut:
        fix = (
            f"Retrieved at rank {own.rank} but the injection budget "
            f"(inject_max_tokens={budget}) cuts it: raise the "
            "budget, shorten stored memories, or inject strong facts first."
        )
        return _VectorResult(
            Outcome(Verdict.long_term_not_injected, (fix,)), found, retrieval=retrieval
        )
    fix = (
        f"Retrieved at rank {own.rank} (distance {own.distance:.3f}) and injected: memory "
        "delivered it. Look at the prompt and the model."
    )
    return _VectorResult(Outcome(Verdict.in_context, (fix,)), found, retrieval=retrieval)


def _is_strong(fact: str, texts: list[str]) -> bool:
    from memdiag.extract import strong_facts

    return any(strong_facts(t) for t in [fact, *texts])


def _fields(text: str, single_only: bool = False) -> dict[str, str]:
    """Extracted field → value; ``single_only`` keeps fields that hold one value at a time.

    Stored memories are written in any phrasing ("User lives in Berlin", "Lives in Berlin"):
    they are read as the store audit reads them (``Extractor.read_memory``).
    """
    from memdiag.extract import default_extractor

    ex = default_extractor()
    return {
        e.field: e.value.casefold()
        for e in ex.read_memory(text)
        if not (single_only and ex.is_multi(e.field))
    }


def _facts_entry(facts: FactsFile, fact: str, evidence: list[str]) -> tuple[FactEntry, str] | None:
    """The facts-file entry for ``fact``: by value, or by key for the field it states.

    The field comes from the fact and from the statements that are its evidence ("我对花生过敏"
    states allergy=花生 even when the fact is worded "对花生过敏"). A single-valued key holding
    another value is outdated; a multi-valued one (allergies) simply does not hold this value.
    """
    from memdiag.extract import default_extractor
    from memdiag.fields import field_for_key
    from memdiag.text import same_value

    for entry in facts.entries:
        if match(fact, f"{entry.key} {entry.value}") or match(fact, entry.value):
            return entry, "value"
    stated = _fields(fact)
    folded = fact.casefold()
    for text in evidence:  # only what the evidence says about this fact (its value is in it)
        for name, value in _fields(text).items():
            if value in folded:
                stated.setdefault(name, value)
    multi = default_extractor().is_multi
    outdated = None
    for entry in facts.entries:
        name = field_for_key(entry.key)
        if name not in stated:
            continue
        if same_value(stated[name], entry.value):
            return entry, "key"
        if not multi(name) and outdated is None:
            outdated = entry
    return (outdated, "key_outdated") if outdated is not None else None


def _contradicting(
    fact: str, record: MemoryRecord, hits: list[Hit], own_ids: set[str]
) -> list[Contradiction]:
    """Hits that give another value for a field the fact (or its record) states: from their
    text or from the same metadata key, and only from the record's own tenant
    (docs/reference.md#stores)."""
    from memdiag.stores.memories import contradictions

    found = contradictions(fact, record.document or "", record.metadata, hits, own_ids)
    return [replace(c, value=c.value.casefold()) for c in found]
