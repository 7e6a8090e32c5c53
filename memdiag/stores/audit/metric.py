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


def space_findings(info: CollectionInfo, unit_vectors: bool | None) -> list[Finding]:
    """Configuration and legacy metadata disagreeing on the space, and L2 spaces."""
    out: list[Finding] = []
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
                    "from cosine, and 1 - distance is not a similarity; recreate it with "
                    "configuration={'hnsw': {'space': 'cosine'}}",
                    name,
                )
            )
    return out
