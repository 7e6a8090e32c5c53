"""distance_metric: distance spaces that make scores or rankings mean something else."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memdiag.stores.audit.report import Finding

if TYPE_CHECKING:
    import numpy as np

    from memdiag.stores.chroma import CollectionInfo


def unit_vectors(embeddings: np.ndarray | None) -> bool | None:
    """Whether every vector has norm 1 (within 1e-3); None when there are no vectors."""
    import numpy as np

    if embeddings is None or not len(embeddings):
        return None
    norms = np.sqrt(np.einsum("ij,ij->i", embeddings, embeddings, dtype=np.float64))
    return bool(np.all(np.abs(norms - 1.0) < 1e-3))


# Collection metadata keys that read like a distance setting but that Chroma ignores (its own
# are the configuration's hnsw/spann "space" and the legacy metadata "hnsw:space"). AutoGen's
# ChromaDBVectorMemory writes {"distance_metric": "cosine"} and scores results as cosine.
LOOKALIKE_SPACE_KEYS = (
    "distance_metric",
    "distance",
    "metric",
    "space",
    "similarity",
    "distance_function",
    "hnsw_space",
)
SPACE_WORDS = {"cosine": "cosine", "cos": "cosine", "l2": "l2", "euclidean": "l2", "ip": "ip"}
SPACE_WORDS.update({"inner_product": "ip", "dot": "ip", "dot_product": "ip"})


def recreate_hint(info: CollectionInfo, space: str) -> str:
    """How to get ``space`` in the store ``info`` belongs to (each library sets it its own way)."""
    store = getattr(info, "store", "chroma")
    if store == "qdrant":
        qdrant = {"cosine": "COSINE", "l2": "EUCLID", "ip": "DOT"}[space]
        return f"recreate the collection with VectorParams(distance=Distance.{qdrant})"
    if store == "lancedb":
        return (
            f"search it with .distance_type('{space}') or build its vector index with "
            f"metric='{space}' (LanceDB keeps no space of its own)"
        )
    return f"recreate the collection with configuration={{'hnsw': {{'space': '{space}'}}}}"


def lookalike_findings(info: CollectionInfo) -> list[Finding]:
    """distance_metric: metadata that names a distance space Chroma never reads."""
    out: list[Finding] = []
    for key in LOOKALIKE_SPACE_KEYS:
        value = info.metadata.get(key)
        if not isinstance(value, str) or value.strip().lower() not in SPACE_WORDS:
            continue
        said = SPACE_WORDS[value.strip().lower()]
        if said == info.space:
            continue
        out.append(
            Finding(
                "distance_metric",
                "warning",
                (),
                f"collection {info.name!r}: metadata {key}={value!r} is not a Chroma setting "
                f"(AutoGen's ChromaDBVectorMemory writes it); the index uses {info.space!r}, so "
                f"distances are {info.space} distances, not {said}: scores and thresholds "
                f"computed as {said} are wrong; {recreate_hint(info, said)}",
                info.name,
            )
        )
    return out


def space_findings(info: CollectionInfo, unit_vectors: bool | None) -> list[Finding]:
    """Configuration and legacy metadata disagreeing on the space, metadata that only looks
    like a space setting, and L2 spaces."""
    out: list[Finding] = lookalike_findings(info)
    name = info.name
    if info.space_disagreement:
        out.append(
            Finding(
                "distance_metric",
                "warning",
                (),
                f"collection {name!r}: configuration says space {info.configured_space!r} but "
                f"legacy metadata hnsw:space says {info.legacy_space!r}; clients that read one "
                "and not the other interpret distances wrongly",
                name,
            )
        )
    if info.space == "l2":
        if unit_vectors:
            out.append(
                Finding(
                    "distance_metric",
                    "info",
                    (),
                    f"collection {name!r} uses L2 distance; its vectors are normalized, so "
                    "ranking equals cosine, but a consumer computing 1 - distance as cosine "
                    "similarity gets "
                    "wrong scores (L2² = 2 - 2·cos) and wrong thresholds",
                    name,
                )
            )
        else:
            out.append(
                Finding(
                    "distance_metric",
                    "warning",
                    (),
                    f"collection {name!r} uses L2 distance over unnormalized vectors: ranking "
                    "differs "
                    "from cosine, and 1 - distance is not a similarity; "
                    + recreate_hint(info, "cosine"),
                    name,
                )
            )
    return out
