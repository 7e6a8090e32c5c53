"""Step 3 of docs/reference.md#verdicts for a memory-store file (``--store``): was the fact
written, and does the library's own retrieval hand it to the agent, alone or beside an entry
that contradicts it?

Each library retrieves as its source does (docs/stores.md#diagnose-on-memory-store-files):

- **MCP memory server** (``mcp-memory``): the agent's own tool call. ``search_nodes(query)``
  returns every entity whose name, type or one observation contains the query (case-insensitive
  substring), each entity whole; ``read_graph`` returns everything. The query is known only when
  given (``store.query``) or recorded in the transcript; otherwise retrieval is unchecked. The
  server stores no dates but appends observations in order (``addObservations`` pushes), so a
  later observation of an entity is the newer one.
- **Agno** (``agno``): ``add_memories_to_context`` puts every memory of the run's ``user_id``
  into the system prompt (``get_user_memories``): a written memory is injected.
- **LangGraph store** (``langgraph-items``, ``langgraph-sqlite``): ``store.search(namespace,
  limit=top_k)`` without an index lists the namespace (SqliteStore newest first, ``ORDER BY
  updated_at DESC``; a dump in its own order) and ignores the query. A store with a vector index
  ranks by an embedding memdiag does not reproduce: unchecked.
- **CrewAI long-term memory** (``crewai-ltm``): ``LongTermMemory.search(task.description,
  latest_n=2)``: the suggestions of the two latest runs of exactly that task (``ORDER BY
  datetime DESC, score ASC``). The task is known only when given (``store.query``).

None of these libraries caps what it injects, so no injection budget applies. Every check
returns its verdict; nothing is mutated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from memdiag.diagnosis.verdicts import Contradiction, MemoryStoreCheck, Outcome, Verdict

if TYPE_CHECKING:
    from memdiag.config import Settings
    from memdiag.stores.documents import DocumentStore
    from memdiag.stores.records import MemoryRecord
    from memdiag.stores.retrieval import UserNames

CREWAI_LATEST_N = 2  # ContextualMemory._fetch_ltm_context: self.ltm.search(task, latest_n=2)


@dataclass(frozen=True)
class Asked:
    """What the failure asks of a store: the fact, and the agent's own query when known."""

    fact: str
    agent_query: str | None  # store.query or the transcript's recorded search; None: unknown
    at_turn: int
    user_names: UserNames | None = None  # the names the user gave in the transcript


@dataclass(frozen=True)
class _Delivery:
    """What the library hands the agent when it retrieves the record holding the fact."""

    retrieved_by: str
    retrieved: bool | None  # None: memdiag cannot know
    records: tuple[MemoryRecord, ...] = ()  # what comes with it (or the whole listing)
    rank: int | None = None
    why_not: str = ""  # the fix when not retrieved, or what memdiag would need
    newer: Callable[[MemoryRecord, MemoryRecord], bool | None] | None = None


def decide_store_file(
    store: DocumentStore, asked: Asked, settings: Settings
) -> tuple[Outcome | None, MemoryStoreCheck]:
    """The verdict of one memory-store file (None: it does not hold the fact)."""
    from memdiag.stores.retrieval import find_in_store

    layout = store.layout.name
    records = find_in_store(store, None, asked.fact, user_names=asked.user_names)
    if not records:
        return None, MemoryStoreCheck(False, layout)
    record = records[0]
    delivery = RETRIEVAL[layout](store, record, asked, settings.store.top_k)
    check = MemoryStoreCheck(
        True,
        layout,
        record.id,
        record.document,
        delivery.retrieved_by,
        delivery.retrieved,
        delivery.rank,
        len(delivery.records) if delivery.retrieved else None,
    )
    stale = _contradicting(asked.fact, record, delivery)
    if stale:
        check = replace(check, contradicting=tuple(stale))
    where = f"{record.id} ({record.document!r})"
    if delivery.retrieved is False:
        fix = f"Stored as {where}, but {delivery.why_not}"
        return Outcome(Verdict.long_term_not_retrieved, (fix,)), check
    if stale:
        others = "; ".join(
            f"{c.id} ({c.document!r}" + (", older" if c.older else "") + ")" for c in stale
        )
        comes = (
            "would come with"
            if delivery.retrieved is None
            else "is handed to the agent together with"
        )
        fix = (
            f"{where} {comes} contradicting entries: {others}. "
            + (OLDER_BY.get(layout, "") + " " if OLDER_BY.get(layout) else "")
            + "Maintain the store: update or delete the superseded entry when the user states "
            "a new value."
        )
        if delivery.retrieved is None:
            return Outcome(Verdict.long_term_unchecked, (delivery.why_not, fix)), check
        return Outcome(Verdict.long_term_stale, (fix,)), check
    if delivery.retrieved is None:
        unknown = f"Stored as {where}. {delivery.why_not}"
        return Outcome(Verdict.long_term_unchecked, (unknown,)), check
    fix = (
        f"{delivery.retrieved_by} delivers {where}: memory delivered it. Look at the prompt and "
        "the model."
    )
    return Outcome(Verdict.in_context, (fix,)), check


OLDER_BY = {
    "mcp-memory": "The MCP memory server stores no dates but appends observations in order, so "
    "the later observation of the entity is the newer one.",
}


def _contradicting(fact: str, record: MemoryRecord, delivery: _Delivery) -> list[Contradiction]:
    """Delivered records that give another value for a field the fact states (same tenant,
    same person: ``memdiag.stores.memories.contradictions``), dated by the library's order when
    it keeps no dates."""
    from memdiag.stores.memories import contradictions
    from memdiag.stores.records import Hit

    if delivery.retrieved is False:
        return []
    hits = [
        Hit(r.id, n, 0.0, r.document, r.metadata, r.collection)
        for n, r in enumerate(delivery.records, 1)
    ]
    found = contradictions(fact, record.document or "", record.metadata, hits, {record.id})
    by_id = {r.id: r for r in delivery.records}
    out = []
    for c in found:
        older = c.older
        if older is None and delivery.newer is not None:
            newer = delivery.newer(by_id[c.id], record)
            older = None if newer is None else not newer
        out.append(replace(c, value=c.value.casefold(), older=older))
    return out


# --- each library's retrieval ---------------------------------------------------------------


def _records(store: DocumentStore) -> list[MemoryRecord]:
    return store.cached_read(store.name).records()


def _quote(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _mcp(store: DocumentStore, record: MemoryRecord, asked: Asked, top_k: int) -> _Delivery:
    """search_nodes / read_graph of ``@modelcontextprotocol/server-memory``: whole entities."""
    entity = str(record.metadata.get("entity", ""))
    records = _records(store)
    own = tuple(r for r in records if r.metadata.get("entity") == entity)

    def newer(a: MemoryRecord, b: MemoryRecord) -> bool | None:  # the server appends in order
        if a.metadata.get("entity") != b.metadata.get("entity"):
            return None
        return _observation(a.id) > _observation(b.id)

    q = asked.agent_query
    if q is None:
        return _Delivery(
            "the agent's read_graph / search_nodes call",
            None,
            own,
            why_not=(
                f"The agent reads the MCP memory graph with its own tool calls (read_graph "
                f"returns all of it; search_nodes every entity whose name, type or an "
                f"observation contains the query), and the transcript does not show the call "
                f"of turn {asked.at_turn}: memdiag cannot tell whether entity {entity!r} was "
                "read. Give the search_nodes query as store.query (or record the call as a "
                "retrieval event) to check it."
            ),
            newer=newer,
        )
    needle = q.lower()
    entity_type = str(record.metadata.get("entity_type", ""))
    hit = (
        needle in entity.lower()
        or needle in entity_type.lower()
        or any(needle in (r.document or "").lower() for r in own)
    )
    how = f"search_nodes({q!r})"
    if not hit:
        return _Delivery(
            how,
            False,
            why_not=(
                f"{how} does not return entity {entity!r}: the MCP memory server matches the "
                "whole query as a case-insensitive substring of an entity's name, type or "
                "observations, and none contains it. Search for the entity (its name or a "
                "word its observations hold), or read the graph (read_graph)."
            ),
        )
    # every entity the query matches comes back whole; the fact's entity is what matters here
    return _Delivery(how, True, own, newer=newer)


def _observation(record_id: str) -> int:
    """The place of an observation in its entity (``Mia Lopez#7`` -> 7)."""
    tail = record_id.rsplit("#", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _agno(store: DocumentStore, record: MemoryRecord, asked: Asked, top_k: int) -> _Delivery:
    """Agno's add_memories_to_context: every memory of the user, in the system prompt."""
    user = str(record.metadata.get("user_id") or "default")  # Agno's user when none is given
    mine = tuple(r for r in _records(store) if str(r.metadata.get("user_id") or "default") == user)
    how = f"Agno's add_memories_to_context (all {len(mine)} memories of user_id={user})"
    return _Delivery(how, True, mine)


def _langgraph(store: DocumentStore, record: MemoryRecord, asked: Asked, top_k: int) -> _Delivery:
    """BaseStore.search(namespace, limit) without an index: the namespace listed, no query."""
    namespace = str(record.metadata.get("namespace", ""))
    ns = tuple(namespace.split("/"))
    index = store.vector_index()
    if index:
        return _Delivery(
            f"store.search({ns!r}, query=...)",
            None,
            why_not=(
                f"The store has a vector index ({index}): store.search ranks the namespace by "
                "the query's embedding, with the index's model, which memdiag does not query "
                "yet. Retrieval was not checked."
            ),
        )
    items = [r for r in _records(store) if r.metadata.get("namespace") == namespace]
    sqlite = store.layout.name == "langgraph-sqlite"
    if sqlite:  # SqliteStore: ORDER BY updated_at DESC (ties stay in the table's order)
        items.sort(key=lambda r: str(r.metadata.get("updated_at") or ""), reverse=True)
    order = "newest first (ORDER BY updated_at DESC)" if sqlite else "in the dump's order"
    limit = top_k
    how = f"store.search({ns!r}, limit={limit})"
    rank = next(n for n, r in enumerate(items, 1) if r.id == record.id)
    listed = tuple(items[:limit])
    if rank > limit:
        return _Delivery(
            how,
            False,
            rank=rank,
            why_not=(
                f"{how} lists the namespace {order}, without ranking by the query (the store "
                f"has no index), and this is item {rank} of {len(items)}: raise the limit "
                "(--top-k), search a narrower namespace, or give the store an index so the "
                "query ranks items."
            ),
        )
    return _Delivery(how, True, listed, rank=rank)


def _crewai(store: DocumentStore, record: MemoryRecord, asked: Asked, top_k: int) -> _Delivery:
    """CrewAI's LongTermMemory.search(task.description, latest_n=2): exact task match."""
    task = str(record.metadata.get("task", ""))
    q = asked.agent_query
    asked_for = repr(q) if q is not None else "task.description"
    how = f"LongTermMemory.search({asked_for}, latest_n={CREWAI_LATEST_N})"
    if q is None:
        return _Delivery(
            how,
            None,
            why_not=(
                f"CrewAI hands long-term memory only to a task whose description is exactly "
                f"{_quote(task)} (the suggestions of its {CREWAI_LATEST_N} latest runs); a "
                "transcript does not say which task failed: give its description as "
                "store.query to check it."
            ),
        )
    if q != task:
        return _Delivery(
            how,
            False,
            why_not=(
                f"it was learned by task {_quote(task)} and CrewAI reads long-term memory by the "
                f"exact task description: the task {_quote(q)} gets none of it. Keep task "
                "descriptions stable, or store the fact where any task can read it (entity "
                "memory, a facts file)."
            ),
        )
    records = [r for r in _records(store) if r.metadata.get("task") == task]
    runs = _latest_runs(records)
    delivered = tuple(r for r in records if r.id.split("#")[0] in runs)
    if record.id not in {r.id for r in delivered}:
        older = sorted({r.id.split("#")[0] for r in records} - set(runs))
        return _Delivery(
            how,
            False,
            why_not=(
                f"{how} reads the {CREWAI_LATEST_N} latest runs of the task "
                f"({', '.join(runs)}) and this suggestion is from an older one "
                f"({', '.join(older)}): CrewAI forgets it. Store lasting facts where they "
                "are read by key."
            ),
        )
    return _Delivery(how, True, _unique_texts(delivered))


def _latest_runs(records: Sequence[MemoryRecord]) -> list[str]:
    """The rows CrewAI's load() returns: ORDER BY datetime DESC, score ASC, LIMIT latest_n."""
    rows: dict[str, tuple[Any, Any]] = {}
    for r in records:
        rows.setdefault(r.id.split("#")[0], (r.metadata.get("datetime"), r.metadata.get("score")))

    def sqlite_key(v: Any) -> tuple[int, Any]:  # SQLite orders NULL < numbers < text
        if v is None:
            return (0, 0)
        if isinstance(v, (int, float)):
            return (1, v)
        return (2, str(v))

    by_score = sorted(rows, key=lambda k: sqlite_key(rows[k][1]))  # score ASC ...
    ordered = sorted(by_score, key=lambda k: sqlite_key(rows[k][0]), reverse=True)  # datetime
    return ordered[:CREWAI_LATEST_N]


def _unique_texts(records: Sequence[MemoryRecord]) -> tuple[MemoryRecord, ...]:
    """CrewAI's dict.fromkeys over the suggestions: one line per distinct text."""
    seen: set[str | None] = set()
    out = []
    for r in records:
        if r.document not in seen:
            seen.add(r.document)
            out.append(r)
    return tuple(out)


# the retrieval of each layout memdiag reads (memdiag.stores.documents); a new layout adds its
# function here, beside its reader
RETRIEVAL: dict[str, Callable[[DocumentStore, MemoryRecord, Asked, int], _Delivery]] = {
    "mcp-memory": _mcp,
    "agno": _agno,
    "langgraph-items": _langgraph,
    "langgraph-sqlite": _langgraph,
    "crewai-ltm": _crewai,
}
