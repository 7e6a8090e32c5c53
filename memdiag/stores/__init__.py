"""Long-term stores (docs/reference.md#stores): what memdiag reads and audits, never modifies.

- ``facts_file``: the JSON facts file (the profile), parsed with line numbers and history;
- ``chroma``: a Chroma store read-only (directory through a temporary copy, or a server);
- ``embeddings``: the collection's own embedding function, offline only;
- ``tiers``: the five memory tiers a stored record belongs to (JSON: "layers");
- ``retrieval``: whether a fact was written to the vector store;
- ``neardup``: the exact near-duplicate search;
- ``audit``: findings over all of them.

Nothing here imports chromadb or numpy at import time; they load when a store is opened. The
package re-exports nothing: import from the module that owns the name.
"""
