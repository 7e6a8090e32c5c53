"""The long-term half of diagnose (SPEC §7 step 3): facts file (profile) and vector store.

The facts file is the profile layer: read by exact key and injected whole at every session
start, so its tokens count in the window's ``memories`` section. The vector store goes
write → retrieve → inject: was the fact written, does the query at the failure turn rank it
within top_k, does an older or contradicting entry come with it, and does it survive the
injection budget? Every rank and distance is Chroma's own; when no embedding function can run,
the retrieval check is reported as skipped — never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdiag.facts import match

if TYPE_CHECKING:
    from memdiag.config import Settings
    from memdiag.diagnose import Diagnosis
    from memdiag.stores.chroma import ChromaStore
    from memdiag.stores.facts_file import FactEntry, FactsFile
    from memdiag.stores.layouts import ReadOptions
    from memdiag.tokens import TokenCounter

PROFILE_HEADER = "Known facts about the user:"
# how deep to look for the fact's own rank when it is not within top_k
RANK_SEARCH_DEPTH = 200


def render_profile(entries: list[FactEntry]) -> str:
    lines = [PROFILE_HEADER, *(f"- {e.key}: {e.value}" for e in entries)]
    return "\n".join(lines) if entries else ""


@dataclass
class LongTermStores:
    facts: FactsFile | None
    chroma: ChromaStore | None
    collection: str | None

    @classmethod
    def open(
        cls,
        facts_file: str | None,
        chroma: str | None,
        collection: str | None,
        options: ReadOptions | None = None,
    ) -> LongTermStores:
        facts = None
        store = None
        if facts_file:
            from memdiag.stores.facts_file import load_facts_file

            facts = load_facts_file(facts_file)
        if chroma:
            from memdiag.stores.chroma import open_chroma

            store = open_chroma(chroma, options)
        return cls(facts, store, collection)

    @classmethod
    def from_settings(cls, settings: Settings) -> LongTermStores:
        """The stores named by ``settings.store`` (possibly none: then ``empty`` is true)."""
        from memdiag.stores.layouts import ReadOptions, Scope

        s = settings.store
        options = ReadOptions(Scope(s.user_id, s.agent_id, s.run_id), s.embedding_function)
        return cls.open(s.facts_file, s.chroma, s.collection, options)

    def close(self) -> None:
        if self.chroma is not None:
            self.chroma.close()

    def __enter__(self) -> LongTermStores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def empty(self) -> bool:
        return self.facts is None and self.chroma is None

    def checked(self) -> list[str]:
        out = []
        if self.facts is not None:
            out.append(f"facts file {self.facts.path}")
        if self.chroma is not None:
            out.append(
                f"chroma {self.chroma.spec}" + (f" [{self.collection}]" if self.collection else "")
            )
        return out

    # -- profile injection -------------------------------------------------------------------

    def injected_profile(
        self, counter: TokenCounter, max_tokens: int
    ) -> tuple[list[FactEntry], int]:
        """Facts-file entries that fit the injection budget, in file order, and their tokens."""
        if self.facts is None:
            return [], 0
        kept: list[FactEntry] = []
        tokens = 0
        for entry in self.facts.entries:
            cost = counter.section_cost(render_profile([*kept, entry]))
            if cost > max_tokens:
                break
            kept.append(entry)
            tokens = cost
        return kept, tokens

    def profile_section(self, settings: Settings) -> tuple[str, int]:
        """The profile text injected at every session start, and its tokens in the window."""
        entries, tokens = self.injected_profile(
            settings.token_counter(), settings.store.inject_max_tokens
        )
        return render_profile(entries), tokens

    # -- the decision ------------------------------------------------------------------------

    def decide(
        self, fact: str, query: str, settings: Settings, counter: TokenCounter, d: Diagnosis
    ) -> None:
        """Set d.verdict/details/flags/fixes for a fact stated only in earlier sessions."""
        d.details["stores_checked"] = self.checked()
        d.details["query"] = query
        strong = _is_strong(fact, [e.text for e in d.evidence])
        in_facts = self._facts_file(fact, counter, settings, d) if self.facts is not None else False
        if in_facts:
            return
        in_vectors = False
        if self.chroma is not None:
            in_vectors = self._vector_store(fact, query, counter, settings, d)
        if in_vectors and strong:
            d.flags.append("strong_fact_in_vector_store")
            d.fixes.append(
                "This is a strong fact (zero tolerance): keep it in the facts file and read it by "
                "exact key, not only by vector similarity."
            )
        if not in_vectors and d.verdict == "never_stated":
            d.verdict = "long_term_not_written"
            d.fixes = [
                "Long-term memory was never built for this: no store holds it "
                f"({'; '.join(self.checked())}). Add a write path: extract facts at session "
                "end and "
                + (
                    "save this strong fact by key in the facts file."
                    if strong
                    else "embed them into the store."
                ),
                "No rewording of the prompt will bring it back.",
            ]

    def _facts_file(
        self, fact: str, counter: TokenCounter, settings: Settings, d: Diagnosis
    ) -> bool:
        assert self.facts is not None
        found = _facts_entry(self.facts, fact, [e.text for e in d.evidence])
        if found is None:
            d.details["facts_file"] = {"found": False}
            return False
        entry, how = found
        injected, tokens = self.injected_profile(counter, settings.store.inject_max_tokens)
        info: dict[str, Any] = {
            "found": True,
            "key": entry.key,
            "value": entry.value,
            "match": how,
            "injected_tokens": tokens,
        }
        d.details["facts_file"] = info
        if how == "key_outdated":
            d.verdict = "long_term_stale"
            info["updated_at"] = entry.updated_at
            d.fixes = [
                f"The facts file holds an outdated value for {entry.key!r} ({entry.value!r}): "
                "update the key when the user states a new value (write path), and keep history "
                "out of what is injected."
            ]
            return True
        if entry not in injected:
            d.verdict = "long_term_not_injected"
            d.fixes = [
                f"{entry.key!r} is in the facts file but the profile injection budget "
                f"(inject_max_tokens={settings.store.inject_max_tokens}) cut it: raise the budget "
                "or order strong facts first."
            ]
            return True
        d.verdict = "in_context"
        d.fixes = [
            f"The facts file delivered it ({entry.key}: {entry.value}) at session start: memory "
            "worked. Look at the prompt and the model."
        ]
        return True

    def _vector_store(
        self, fact: str, query: str, counter: TokenCounter, settings: Settings, d: Diagnosis
    ) -> bool:
        from memdiag.stores.retrieval import find_in_store

        assert self.chroma is not None
        records = find_in_store(self.chroma, self.collection, fact)
        if not records:
            d.details["vector_store"] = {"found": False}
            return False
        record = records[0]
        d.details["vector_store"] = {
            "found": True,
            "id": record.id,
            "collection": record.collection,
            "document": record.document,
        }
        top_k = settings.store.top_k
        ef, reason = self.chroma.embedding_function(record.collection)
        if ef is None:
            d.verdict = "long_term_unchecked"
            d.details["skipped_reason"] = reason
            d.fixes = [f"Retrieval was not checked: {reason}"]
            return True
        count = self.chroma.collection_info(record.collection).count
        hits = self.chroma.query(
            record.collection, query, min(count, max(top_k, RANK_SEARCH_DEPTH))
        )
        wanted = {r.id for r in records if r.collection == record.collection}
        own = next((h for h in hits if h.id in wanted), None)
        max_distance = settings.store.max_distance
        retrieval = {
            "top_k": top_k,
            "max_distance": max_distance,
            "rank": own.rank if own else None,
            "distance": round(own.distance, 6) if own else None,
            "searched": len(hits),
            "top": [
                {"id": h.id, "rank": h.rank, "distance": round(h.distance, 6)} for h in hits[:top_k]
            ],
        }
        d.details["retrieval"] = retrieval
        retrieved = (
            own is not None
            and own.rank <= top_k
            and (max_distance is None or own.distance <= max_distance)
        )
        if not retrieved:
            d.verdict = "long_term_not_retrieved"
            where = (
                f"rank {own.rank}, distance {own.distance:.3f}"
                if own
                else f"not in the first {len(hits)} results"
            )
            d.fixes = [
                f"Stored as {record.id} but the query at turn {d.at_turn} does not retrieve it "
                f"({where}; top_k={top_k}"
                + (f", max_distance={max_distance}" if max_distance is not None else "")
                + "). Fix retrieval: rewrite the query (include the topic, e.g. food/diet), raise "
                "top_k, add metadata filters, or read strong facts by exact key instead.",
            ]
            return True
        assert own is not None
        from memdiag.stores.memories import contradictions

        # another value for the same field or metadata key, from the same tenant (SPEC §6)
        stale = [
            c.to_dict()
            for c in contradictions(
                fact, record.document or "", record.metadata, hits[:top_k], wanted
            )
        ]
        if stale:
            d.verdict = "long_term_stale"
            retrieval["contradicting"] = stale
            outranks = [s["id"] for s in stale if s["rank"] < own.rank]
            d.fixes = [
                "Retrieved together with contradicting entries "
                f"({', '.join(s['id'] for s in stale)}"
                + (f"; {', '.join(outranks)} outrank it" if outranks else "")
                + "): maintain the store — delete or merge superseded entries on write, and "
                "prefer the newest by timestamp when injecting.",
            ]
            return True
        injected = 0
        cut = False
        for h in hits[:top_k]:
            injected = counter.section_cost("\n".join(x.document or "" for x in hits[: h.rank]))
            if injected > settings.store.inject_max_tokens and h.rank <= own.rank:
                cut = True
                break
        retrieval["inject_max_tokens"] = settings.store.inject_max_tokens
        if cut:
            d.verdict = "long_term_not_injected"
            d.fixes = [
                f"Retrieved at rank {own.rank} but the injection budget "
                f"(inject_max_tokens={settings.store.inject_max_tokens}) cuts it: raise the "
                "budget, shorten stored memories, or inject strong facts first.",
            ]
            return True
        d.verdict = "in_context"
        d.fixes = [
            f"Retrieved at rank {own.rank} (distance {own.distance:.3f}) and injected: memory "
            "delivered it. Look at the prompt and the model."
        ]
        return True


def _is_strong(fact: str, texts: list[str]) -> bool:
    from memdiag.extract import strong_facts

    return any(strong_facts(t) for t in [fact, *texts])


def _fields(text: str, single_only: bool = False) -> dict[str, str]:
    """Extracted field → value; ``single_only`` keeps fields that hold one value at a time.

    Stored memories are usually third person ("User lives in Berlin"); the extractor reads
    first-person statements, so they are rewritten first, as the store audit does.
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
    from memdiag.extract import default_extractor, field_for_key
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
