"""Opening the long-term stores, and the one profile injection replay, diagnose and check use.

The facts file is the profile layer: read by exact key and injected whole at every session
start, so its tokens count in the window's ``memories`` section (docs/reference.md#verdicts). Every
command that
builds a window takes that section from :meth:`LongTermStores.profile_section` (or from
:func:`profile_memory`, which opens the facts file alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memdiag.config import Settings
    from memdiag.stores.chroma import ChromaStore
    from memdiag.stores.facts_file import FactEntry, FactsFile
    from memdiag.stores.layouts import ReadOptions
    from memdiag.tokens import TokenCounter

PROFILE_HEADER = "Known facts about the user:"
NO_MEMORY: tuple[str, int] = ("", 0)


def render_profile(entries: list[FactEntry]) -> str:
    lines = [PROFILE_HEADER, *(f"- {e.key}: {e.value}" for e in entries)]
    return "\n".join(lines) if entries else ""


@dataclass
class LongTermStores:
    """The facts file and/or Chroma store named by the settings; a context manager."""

    facts: FactsFile | None
    chroma: ChromaStore | None
    collection: str | None
    # --store: a memory-store file (stores.documents) or a vector store folder (Qdrant), opened
    # by stores.documents.open_store, the one place that tells them apart
    memory: Any = None

    @classmethod
    def open(
        cls,
        facts_file: str | None,
        chroma: str | None,
        collection: str | None,
        options: ReadOptions | None = None,
        memory_store: str | None = None,
    ) -> LongTermStores:
        facts = None
        store = None
        memory = None
        if facts_file:
            from memdiag.stores.facts_file import load_facts_file

            facts = load_facts_file(facts_file)
        if chroma:
            from memdiag.stores.chroma import open_chroma

            store = open_chroma(chroma, options)
        if memory_store:
            from memdiag.stores.documents import open_store

            memory = open_store(memory_store, options)
        return cls(facts, store, collection, memory)

    @classmethod
    def from_settings(cls, settings: Settings) -> LongTermStores:
        """The stores named by ``settings.store`` (possibly none: then ``empty`` is true): the
        same for diagnose, inspect-store and check (a memory-store file too: docs/stores.md)."""
        from memdiag.stores.layouts import ReadOptions, Scope

        s = settings.store
        # one tenant of a multi-user store; the model of a collection that persisted none
        options = ReadOptions(Scope(s.user_id, s.agent_id, s.run_id), s.embedding_function)
        return cls.open(s.facts_file, s.chroma, s.collection, options, s.memory_store)

    def close(self) -> None:
        if self.chroma is not None:
            self.chroma.close()
        if self.memory is not None:  # a Qdrant folder's temporary copy is removed
            self.memory.close()

    def __enter__(self) -> LongTermStores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def empty(self) -> bool:
        return self.facts is None and self.chroma is None and self.memory is None

    def queried(self) -> list[tuple[Any, str | None]]:
        """The stores diagnose asks after the facts file, in order, with the collection to ask
        (None: all its memory collections): Chroma, then the ``--store`` one (a vector store
        such as Qdrant, or a memory-store file, which is one collection)."""
        out: list[tuple[Any, str | None]] = []
        if self.chroma is not None:
            out.append((self.chroma, self.collection))
        if self.memory is not None:
            out.append((self.memory, self.collection if self.memory.kind != "file" else None))
        return out

    def checked(self) -> list[str]:
        out = []
        if self.facts is not None:
            out.append(f"facts file {self.facts.path}")
        if self.chroma is not None:
            out.append(
                f"chroma {self.chroma.spec}" + (f" [{self.collection}]" if self.collection else "")
            )
        if self.memory is not None:
            out.append(f"{self.memory.label} {self.memory.spec}")
        return out

    # -- profile injection -------------------------------------------------------------------

    def injected_profile(
        self, counter: TokenCounter, max_tokens: int
    ) -> tuple[list[FactEntry], int]:
        """Facts-file entries that fit the injection budget, in file order, and their tokens.

        The longest prefix of the entries whose rendered profile costs at most ``max_tokens``.
        Counting every prefix was quadratic (4.1 s at 1,000 keys, 40 s at 4,000); the cost
        only grows with the prefix, so the whole profile is counted once and, when it does
        not fit, the cut is found by bisection: O(N log N) tokens counted.
        """
        if self.facts is None:
            return [], 0
        entries = list(self.facts.entries)

        def cost(n: int) -> int:
            return counter.section_cost(render_profile(entries[:n]))

        whole = cost(len(entries))
        if whole <= max_tokens:
            return entries, whole
        fits, over = 0, len(entries)  # cost(fits) <= max_tokens < cost(over)
        while over - fits > 1:
            mid = (fits + over) // 2
            if cost(mid) <= max_tokens:
                fits = mid
            else:
                over = mid
        return entries[:fits], cost(fits)

    def profile_section(self, settings: Settings) -> tuple[str, int]:
        """The profile text injected at every session start, and its tokens in the window."""
        entries, tokens = self.injected_profile(
            settings.token_counter(), settings.store.inject_max_tokens
        )
        return render_profile(entries), tokens


def profile_memory(settings: Settings) -> tuple[str, int]:
    """The injected profile of ``settings.store.facts_file`` (text, tokens); none without one.

    Replaying needs only the profile's room in the window, so the vector store stays closed.
    """
    if not settings.store.facts_file:
        return NO_MEMORY
    with LongTermStores.open(settings.store.facts_file, None, None) as stores:
        return stores.profile_section(settings)
