"""Chroma's default embedding model (ONNX all-MiniLM-L6-v2), run with padding per batch.

chromadb's ``ONNXMiniLM_L6_V2`` pads every text to 256 word pieces, so a six-word sentence
costs as much as a paragraph: embedding a 600-turn conversation took minutes on two cores. The
same model files, the same tokenizer and the same mean pooling, with texts sorted by length and
padded only to the longest of their batch, give the same vectors (cosine > 0.9999 with
chromadb's, tested) about ten times faster. onnxruntime and tokenizers come with chromadb.

The session runs each batch on one thread, and one Python thread per core runs batches side
by side (onnxruntime releases the GIL while it runs). A batch of short sentences is too small
for onnxruntime's own intra-op threads to split well: on the LoCoMo dev conversation's 1,322
sentences (2 cores) they cost 2.86 s of CPU for 1.63 s wall, a batch per thread 2.34 s for
1.19 s, the vectors bit for bit the same (tested).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MAX_TOKENS = 256  # as sentence-transformers and chromadb
# texts per model call: on the project's 2-core machine 16 cost about 10% less CPU than 64
# (and 8 or 32 more than 16) for the 1,208 sentences of the LoCoMo dev conversation
BATCH = 16
MODEL_NAME = "all-MiniLM-L6-v2"

_SESSIONS: dict[Path, tuple[Any, Any]] = {}


def _load(model_dir: Path) -> tuple[Any, Any]:
    if model_dir not in _SESSIONS:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(model_dir / "onnx" / "tokenizer.json"))
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.no_padding()
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = 1  # parallel batches instead (see the module docstring)
        so.inter_op_num_threads = 1
        session = ort.InferenceSession(
            str(model_dir / "onnx" / "model.onnx"), so, providers=["CPUExecutionProvider"]
        )
        _SESSIONS[model_dir] = (tok, session)
    return _SESSIONS[model_dir]


class MiniLM:
    """texts → unit vectors (float32, n × 384), identical to chromadb's default model."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        size = (model_dir / "onnx" / "model.onnx").stat().st_size
        # the cache key names the model by its file, so another export never mixes vectors
        self.name = f"{MODEL_NAME}-{size}"

    def __call__(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """``progress(n)``: n more texts embedded, called after each model call of ``BATCH``
        (from the thread that ran it, one call at a time)."""
        import numpy as np

        tok, session = _load(self.model_dir)
        out = np.zeros((len(texts), 384), dtype=np.float32)
        if not texts:
            return out
        # one text at a time: as fast here as encode_batch, whose thread pool then spins
        # on the cores the model needs (and stays behind in the process)
        encoded = [tok.encode(t).ids for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        batches = [order[start : start + BATCH] for start in range(0, len(order), BATCH)]
        reported = threading.Lock()

        def run(rows: list[int]) -> None:
            width = max(len(encoded[i]) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encoded[i])
                ids[r, :n] = encoded[i]
                mask[r, :n] = 1
            hidden = session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[rows] = pooled  # rows of different batches never overlap
            if progress is not None:
                with reported:
                    progress(len(rows))

        _in_parallel(run, batches)
        return out


def _workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def _in_parallel(run: Callable[[list[int]], None], batches: list[list[int]]) -> None:
    """``run(batch)`` for every batch, on one thread per core (this one among them); the first
    error raised is raised here, after every thread has stopped."""
    threads = min(_workers(), len(batches))
    if threads <= 1:
        for rows in batches:
            run(rows)
        return
    todo = iter(batches)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        while not errors:
            with lock:
                rows = next(todo, None)
            if rows is None:
                return
            try:
                run(rows)
            except BaseException as exc:  # raised again by the calling thread
                errors.append(exc)

    helpers = [threading.Thread(target=work, daemon=True) for _ in range(threads - 1)]
    for t in helpers:
        t.start()
    work()
    for t in helpers:
        t.join()
    if errors:
        raise errors[0]


def local_minilm() -> tuple[MiniLM | None, str]:
    """The local model (``$MEMDIAG_ONNX_MODEL_DIR`` or Chroma's cache), or (None, why)."""
    from memdiag.stores.embeddings import find_model_dir, home_relative

    model_dir, reason = find_model_dir()
    if model_dir is None:
        return None, reason
    return MiniLM(model_dir), f"ONNX {MODEL_NAME} from {home_relative(model_dir)}"
