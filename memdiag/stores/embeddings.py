"""Resolving a collection's embedding function offline (docs/reference.md#stores).

Chroma persists each collection's embedding function config. memdiag rebuilds it only when it
can run locally without network: Chroma's default ONNX all-MiniLM-L6-v2, whose files are found in
``$MEMDIAG_ONNX_MODEL_DIR`` or in Chroma's usual cache. chromadb would otherwise try to download
the model on first use, which hangs or fails offline, so we check the files ourselves first and
return ``(None, reason)`` instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported lazily: `memdiag --help` must stay instant
    import numpy as np

ENV_MODEL_DIR = "MEMDIAG_ONNX_MODEL_DIR"
ONNX_FILES = (
    "config.json",
    "model.onnx",
    "special_tokens_map.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.txt",
)
# Names under which chromadb registers the same local ONNX MiniLM model.
LOCAL_DEFAULT_NAMES = frozenset({"default", "onnx_mini_lm_l6_v2"})

Embedder = Callable[[Sequence[str]], "np.ndarray"]

# The per-finding reason is short; the whole story (where memdiag looked, how to get the model)
# is told once per run by the CLI, from ``model_misses()`` (docs/model.md).
MISSING = (
    f"embedding model all-MiniLM-L6-v2 not installed (`memdiag fetch-model` gets it, or set "
    f"{ENV_MODEL_DIR})"
)
_MISSES: dict[str, None] = {}  # this process's "looked in ..." lines, in order, once each


def chroma_cache_dir() -> Path:
    """Chroma's usual model cache, under the current HOME (read now, not at import)."""
    return Path.home() / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2"


def home_relative(path: Path) -> str:
    """``path`` with the user's home folder written ``~``: messages that reach JSON output
    never hold the home path (docs/reference.md#json-output)."""
    home = str(Path.home())
    text = str(path)
    if home not in ("", "/") and (text == home or text.startswith(home + os.sep)):
        return "~" + text[len(home) :]
    return text


def has_model_files(d: Path) -> bool:
    """``d/onnx/`` holds all six files of the model (an unreadable name holds none)."""
    try:
        return all((d / "onnx" / f).is_file() for f in ONNX_FILES)
    except OSError:  # a name the OS refuses (MEMDIAG_ONNX_MODEL_DIR too long, a loop)
        return False


def find_model_dir() -> tuple[Path | None, str]:
    """The folder containing ``onnx/`` with all six model files, or (None, a short reason).

    A miss is remembered (``take_model_misses()``) so that the CLI names the model once per run.
    """
    candidates: list[tuple[Path, str]] = []
    env = os.environ.get(ENV_MODEL_DIR)
    if env:
        candidates.append((Path(env).expanduser(), ENV_MODEL_DIR))
    candidates.append((chroma_cache_dir(), "Chroma's cache"))
    for d, _label in candidates:
        if has_model_files(d):
            return d, ""
    tried = ", ".join(f"{label} {home_relative(d)}" for d, label in candidates)
    _MISSES.setdefault(tried, None)
    return None, MISSING


def take_model_misses() -> list[str]:
    """Where the model was looked for and not found since the last call (one entry per set of
    places), and forget them: the CLI names the model once per run."""
    misses = list(_MISSES)
    _MISSES.clear()
    return misses


def note_model_miss(tried: str) -> None:
    """Record a miss seen elsewhere (a `check --jobs` worker), so the parent names it once."""
    _MISSES.setdefault(tried, None)


def missing_model_note(tried: str) -> str:
    """The one paragraph a run prints when it needed the model and did not find it."""
    return (
        f"the embedding model all-MiniLM-L6-v2 was not found (looked in {tried}): evidence "
        "was ranked without its semantic ranker, and a store's retrieval cannot be checked "
        "without it. Get it "
        "once with `memdiag fetch-model` (the archive chromadb itself downloads, 91 MB "
        f"unpacked, into Chroma's cache), or set {ENV_MODEL_DIR} to a folder holding "
        "onnx/model.onnx and its tokenizer files (docs/model.md)"
    )


_CACHE: dict[Path, Any] = {}


def _onnx_default(model_dir: Path) -> Any:
    # One instance per model folder: loading the ONNX session costs ~0.5 s.
    if model_dir not in _CACHE:
        from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2

        ef = ONNXMiniLM_L6_V2()
        # An instance attribute, not the class one, so we never change chromadb's global default.
        ef.DOWNLOAD_PATH = model_dir
        _CACHE[model_dir] = ef
    return _CACHE[model_dir]


def resolve_embedding_function(collection_config: Any) -> tuple[Any | None, str]:
    """The collection's own embedding function if it can run offline, else (None, why + fix).

    ``collection_config`` is the collection's ``configuration_json`` (a dict), or directly its
    ``embedding_function`` entry, or None.
    """
    ef_cfg: Any = collection_config
    if isinstance(collection_config, dict) and (
        "embedding_function" in collection_config or "hnsw" in collection_config
    ):
        ef_cfg = collection_config.get("embedding_function")
    if ef_cfg is None:
        # Created with embedding_function=None: vectors came from outside Chroma, and nothing
        # says which model made them, so a query embedding could not be compared honestly.
        return None, (
            "the collection has no persisted embedding function (created with "
            "embedding_function=None); its vectors came from a model memdiag cannot know"
        )
    if not isinstance(ef_cfg, dict):
        return None, f"unrecognized embedding function config {ef_cfg!r}"
    kind = ef_cfg.get("type")
    name = ef_cfg.get("name")
    if kind == "legacy":
        return None, (
            "the collection uses a legacy (pre-1.0) embedding function config that does not "
            "name its model"
        )
    if name in LOCAL_DEFAULT_NAMES:
        model_dir, reason = find_model_dir()
        if model_dir is None:
            return None, reason
        # where the model was found is not part of the answer: JSON output stays the same
        # bytes on every machine (docs/reference.md#json-output)
        return _onnx_default(model_dir), f"{name} (ONNX all-MiniLM-L6-v2)"
    # Other registered functions call remote APIs or download models: never from memdiag.
    return None, (
        f"the collection's embedding function {name!r} is not the local default model; "
        "memdiag runs only Chroma's default ONNX MiniLM offline"
    )


def embedding_function_name(collection_config: Any) -> str | None:
    """The persisted embedding function's name ("default", "openai", "legacy"), or None."""
    if not isinstance(collection_config, dict):
        return None
    ef = collection_config.get("embedding_function")
    if not isinstance(ef, dict):
        return None
    name = ef.get("name")
    return str(name) if name else (str(ef.get("type")) if ef.get("type") else None)


def embed(ef: Any, texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` with a chromadb embedding function as a float32 matrix."""
    import numpy as np

    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.asarray(ef(list(texts)), dtype=np.float32)


def default_embedder() -> tuple[Embedder | None, str]:
    """An embedder (texts → float32 matrix) using the local default model, or (None, reason)."""
    ef, reason = resolve_embedding_function({"type": "known", "name": "default", "config": {}})
    if ef is None:
        return None, reason

    def _embedder(texts: Sequence[str]) -> np.ndarray:
        return embed(ef, texts)

    return _embedder, reason
