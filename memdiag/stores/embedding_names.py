"""Naming the embedding function of a collection that did not persist one
(docs/reference.md#stores).

langchain-chroma and mem0 create their collections with ``embedding_function=None``: the
vectors came from a model the store does not name. ``--embedding-function NAME`` names it:

- ``default``: Chroma's ONNX all-MiniLM-L6-v2, run offline (384 dimensions);
- a provider (``openai``, ``cohere``, ``ollama``, ...), optionally ``provider:model``: built with
  chromadb's own embedding function for that provider, and only then is memdiag allowed to
  reach the network (the user named a network service);
- the name is checked against the stored vectors' dimension first: a model that makes vectors
  of another size cannot have made these, and using it is an error (exit 2).

With no flag, the model is identified (``identify_model``): a few stored documents are embedded
again with each model at hand offline (Chroma's ONNX all-MiniLM-L6-v2), and a model whose
vectors reproduce the stored ones (cosine >= 0.999 for every record tried) is used, saying so.
Otherwise ``names_for_dimension`` says which names would fit. The flag for a collection that
persisted its own function is accepted only when it names that function (docs/stores.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdiag.errors import UnavailableError, UsageError

if TYPE_CHECKING:
    from memdiag.stores.layouts import ReadOptions


@dataclass(frozen=True)
class KnownModel:
    provider: str  # the name the user types, and chromadb's registry name
    model: str
    dimension: int
    offline: bool = False


# Models whose output size is fixed and documented by their providers.
KNOWN_MODELS: tuple[KnownModel, ...] = (
    KnownModel("default", "all-MiniLM-L6-v2", 384, offline=True),
    KnownModel("openai", "text-embedding-3-small", 1536),
    KnownModel("openai", "text-embedding-ada-002", 1536),
    KnownModel("openai", "text-embedding-3-large", 3072),
    KnownModel("cohere", "embed-english-v3.0", 1024),
    KnownModel("cohere", "embed-multilingual-v3.0", 1024),
    KnownModel("cohere", "embed-english-light-v3.0", 384),
    KnownModel("ollama", "nomic-embed-text", 768),
    KnownModel("ollama", "mxbai-embed-large", 1024),
    KnownModel("ollama", "all-minilm", 384),
    KnownModel("voyageai", "voyage-3", 1024),
    KnownModel("mistral", "mistral-embed", 1024),
    KnownModel("jina", "jina-embeddings-v3", 1024),
    KnownModel("google_genai", "text-embedding-004", 768),
    KnownModel("sentence_transformer", "all-MiniLM-L6-v2", 384),
    KnownModel("sentence_transformer", "all-mpnet-base-v2", 768),
)
PROVIDERS = tuple(dict.fromkeys(m.provider for m in KNOWN_MODELS))
# where each provider's API key is read from (chromadb's own variable first)
API_KEY_ENV = {
    "openai": ("CHROMA_OPENAI_API_KEY", "OPENAI_API_KEY"),
    "cohere": ("CHROMA_COHERE_API_KEY", "COHERE_API_KEY"),
    "voyageai": ("CHROMA_VOYAGE_API_KEY", "VOYAGE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "jina": ("CHROMA_JINA_API_KEY", "JINA_API_KEY"),
    "google_genai": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}


def names_for_dimension(dimension: int | None) -> list[str]:
    """``--embedding-function`` values whose model makes vectors of ``dimension``."""
    if dimension is None:
        return []
    out: list[str] = []
    for m in KNOWN_MODELS:
        name = m.provider if m.provider == "default" else f"{m.provider}:{m.model}"
        if m.dimension == dimension:
            out.append(name)
    return out


def parse_name(name: str) -> tuple[str, str | None]:
    """``openai:text-embedding-3-small`` → (openai, text-embedding-3-small); ``default`` alone."""
    provider, _, model = name.strip().partition(":")
    return provider.strip().lower(), (model.strip() or None)


def choose_model(name: str, dimension: int | None, collection: str) -> KnownModel:
    """The model ``name`` stands for, checked against the stored vectors' ``dimension``.

    Raises ``UsageError`` (exit 2) for an unknown name or a dimension that does not fit.
    """
    provider, model = parse_name(name)
    if provider not in PROVIDERS:
        raise UsageError(
            f"unknown --embedding-function {name!r}; choose one of: {', '.join(PROVIDERS)} "
            "(optionally provider:model, e.g. openai:text-embedding-3-small)"
        )
    candidates = [m for m in KNOWN_MODELS if m.provider == provider]
    if model is not None:
        named = [m for m in candidates if m.model == model]
        if named:
            candidates = named
        elif provider != "default":
            # a model memdiag has no size for: trust the user, the dimension is checked on use
            return KnownModel(provider, model, dimension or 0)
    if dimension is not None:
        fitting = [m for m in candidates if m.dimension == dimension]
        if not fitting:
            sizes = " or ".join(sorted({f"{m.dimension}" for m in candidates}, key=int))
            fits = ", ".join(names_for_dimension(dimension)) or "none memdiag knows"
            raise UsageError(
                f"--embedding-function {name} makes {sizes}-dimensional vectors but collection "
                f"{collection!r} holds {dimension}-dimensional ones: it cannot have made them "
                f"(names that fit {dimension}: {fits})"
            )
        candidates = fitting
    return candidates[0]


def build_embedding_function(choice: KnownModel) -> tuple[Any, str]:
    """A chromadb embedding function for ``choice``, and how it was built.

    ``default`` runs offline from the local model files; a provider is built with chromadb's
    own class for it and may reach the network (the user named it).
    """
    import os

    if choice.provider == "default":
        from memdiag.stores.embeddings import resolve_embedding_function

        ef, reason = resolve_embedding_function({"type": "known", "name": "default"})
        if ef is None:
            raise UnavailableError(reason)
        return ef, f"{reason}, named by --embedding-function"
    from chromadb.utils.embedding_functions import known_embedding_functions

    cls = known_embedding_functions.get(choice.provider)
    if cls is None:
        raise UnavailableError(f"this chromadb has no embedding function {choice.provider!r}")
    kwargs: dict[str, Any] = {"model_name": choice.model}
    for var in API_KEY_ENV.get(choice.provider, ()):
        if os.environ.get(var):
            kwargs["api_key"] = os.environ[var]
            break
    try:
        ef = cls(**kwargs)
    except Exception as e:  # missing package or key: one line, the user's fix
        text = " ".join(str(e).split()) or type(e).__name__
        raise UnavailableError(
            f"cannot build embedding function {choice.provider}:{choice.model}: {text[:200]}"
        ) from None
    return ef, f"{choice.provider}:{choice.model} (named by --embedding-function; uses its API)"


# a model reproduces stored vectors when every record tried comes back this close
REPRODUCED_COSINE = 0.999
IDENTIFY_RECORDS = 5

Sample = Callable[[], tuple[list[str], Any]]  # stored texts and their vectors (n, dim)


def for_store(store: Any, name: str) -> tuple[Any | None, str]:
    """``resolve_for_collection`` for collection ``name`` of a ``ChromaStore``."""
    col = store._collection(name)
    config = store._call(
        f"cannot read the configuration of {name!r}", lambda: col.configuration_json
    )
    return resolve_for_collection(
        config,
        lambda: store.collection_info(name).dimension,
        name,
        store.options,
        lambda: stored_sample(store.memories(name).data),
    )


def stored_sample(data: Any) -> tuple[list[str], Any]:
    """The first ``IDENTIFY_RECORDS`` records with text of a collection, and their vectors."""
    rows = [i for i, d in enumerate(data.documents) if d and d.strip()][:IDENTIFY_RECORDS]
    emb = data.embeddings
    return [data.documents[i] or "" for i in rows], None if emb is None else emb[rows]


def identify_model(sample: Sample, dimension: int | None) -> tuple[Any | None, str]:
    """The offline model that made the stored vectors, or (None, what was tried).

    Embeds up to ``IDENTIFY_RECORDS`` stored texts with each model at hand offline and keeps one
    whose vectors all have cosine >= ``REPRODUCED_COSINE`` to the stored ones.
    """
    import numpy as np

    from memdiag.stores.embeddings import embed, find_model_dir, resolve_embedding_function

    texts, vectors = sample()
    if not texts or vectors is None or not len(vectors):
        return None, "no stored document to re-embed"
    texts, stored = texts[:IDENTIFY_RECORDS], np.asarray(vectors[:IDENTIFY_RECORDS], dtype=float)
    tried: list[str] = []
    # the models memdiag runs offline; a model of another dimension cannot have made them
    for model in (m for m in KNOWN_MODELS if m.offline):
        if dimension is not None and model.dimension != dimension:
            tried.append(f"{model.model} makes {model.dimension}-dimensional vectors")
            continue
        if find_model_dir()[0] is None:
            tried.append(f"{model.model} is not installed ({find_model_dir()[1]})")
            continue
        ef, how = resolve_embedding_function({"type": "known", "name": model.provider})
        if ef is None:
            tried.append(how)
            continue
        got = np.asarray(embed(ef, texts), dtype=float)
        norms = np.linalg.norm(got, axis=1) * np.linalg.norm(stored, axis=1)
        cos = np.einsum("ij,ij->i", got, stored) / np.where(norms > 0, norms, 1.0)
        same = int(np.count_nonzero(cos >= REPRODUCED_COSINE))
        if same == len(texts):
            return ef, (
                f"vectors reproduced by {model.model}: {same}/{len(texts)} records "
                f"(ONNX, offline; --embedding-function overrides)"
            )
        tried.append(
            f"{model.model} reproduced {same}/{len(texts)} stored vectors "
            f"(lowest cosine {float(cos.min()):.3f})"
        )
    return None, "; ".join(tried)


def _agrees(name: str, persisted: str) -> bool:
    """Whether ``--embedding-function name`` names the function a collection persisted."""
    from memdiag.stores.embeddings import LOCAL_DEFAULT_NAMES

    provider, _model = parse_name(name)
    if persisted in LOCAL_DEFAULT_NAMES:
        return provider in ("default", *LOCAL_DEFAULT_NAMES)
    return provider == persisted.lower()


def resolve_for_collection(
    config: Any,
    dimension: Callable[[], int | None],
    collection: str,
    options: ReadOptions,
    sample: Sample | None = None,
) -> tuple[Any | None, str]:
    """The embedding function for one collection's queries, or (None, why + what would fit).

    A persisted function is the collection's own: ``--embedding-function`` naming another one,
    or one whose vectors have another dimension, is an error (exit 2). Without a persisted one,
    the named function is checked against the stored ``dimension``; with no name either, the
    model is identified from the stored vectors (``identify_model``, when ``sample`` is given).
    """
    from memdiag.stores.embeddings import embedding_function_name, resolve_embedding_function

    ef, reason = resolve_embedding_function(config)
    persisted = embedding_function_name(config)
    if options.embedding_function and persisted is not None:
        if persisted == "legacy" or not _agrees(options.embedding_function, persisted):
            dim = dimension()
            size = f" for its {dim}-dimensional vectors" if dim else ""
            raise UsageError(
                f"--embedding-function {options.embedding_function} contradicts collection "
                f"{collection!r}: it persisted its own embedding function {persisted!r}{size}; "
                "drop the flag (it names the model of collections that persisted none)"
            )
        choose_model(options.embedding_function, dimension(), collection)  # the dimension
    if ef is not None or persisted is not None:
        return ef, reason
    if options.embedding_function:
        choice = choose_model(options.embedding_function, dimension(), collection)
        return build_embedding_function(choice)
    dim = dimension()
    fits = names_for_dimension(dim)
    if dim:
        reason = (
            "the collection has no persisted embedding function (langchain-chroma and mem0 create "
            "theirs with embedding_function=None)"
        )
        if sample is not None:
            found, tried = identify_model(sample, dim)
            if found is not None:
                return found, tried
            reason = f"{reason}; re-embedding stored documents: {tried}"
        if fits:
            first, rest = fits[0], fits[1:]
            also = f" (also fit: {', '.join(rest)})" if rest else ""
            return None, (
                f"{reason}; name the model of its {dim}-dimensional vectors with "
                f"--embedding-function {first}{also}"
            )
        return None, f"{reason}; no model memdiag knows makes {dim}-dimensional vectors"
    return None, reason


def for_vectors(
    keeper: str, collection: str, dimension: int | None, options: ReadOptions, sample: Sample
) -> tuple[Any | None, str]:
    """The model for the queries of a store that keeps vectors but never their model (Qdrant,
    LanceDB): the one ``--embedding-function`` names (checked against the dimension), else the
    one at hand that reproduces the stored vectors (``identify_model``), else (None, what was
    tried and which names fit)."""
    if options.embedding_function:
        return build_embedding_function(
            choose_model(options.embedding_function, dimension, collection)
        )
    ef, how = identify_model(sample, dimension)
    if ef is not None:
        return ef, how
    how = f"{keeper} keeps no embedding model; re-embedding stored documents: {how}"
    fits = names_for_dimension(dimension)
    if fits and dimension:
        how += (
            f"; name the model of its {dimension}-dimensional vectors with "
            f"--embedding-function {fits[0]}"
        )
    return None, how
