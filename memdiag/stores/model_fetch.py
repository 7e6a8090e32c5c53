"""Getting Chroma's default embedding model, on request only (`memdiag fetch-model`).

The files are exactly those chromadb downloads on first use (its ``ONNXMiniLM_L6_V2``: the same
URL, archive name and SHA256), unpacked where chromadb looks for them
(``~/.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx/``), so chromadb and memdiag share one copy.
memdiag never downloads anything by itself: without the model it ranks evidence lexically and
says that retrieval was not checked (docs/model.md).

The archive is streamed to a temporary file beside the target while its SHA256 is computed; a
mismatch deletes it. It is unpacked into a temporary folder (regular files under ``onnx/`` only:
no links, no absolute or ``..`` names) which replaces ``onnx/`` in one rename, so an interrupted
or failed fetch leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from memdiag.errors import InputError, UnavailableError, clip
from memdiag.stores.embeddings import ONNX_FILES, chroma_cache_dir, has_model_files

# chromadb's ONNXMiniLM_L6_V2 (tests/test_model_fetch.py keeps these equal to chromadb's own)
MODEL_URL = "https://chroma-onnx-models.s3.amazonaws.com/all-MiniLM-L6-v2/onnx.tar.gz"
ARCHIVE_NAME = "onnx.tar.gz"
MODEL_SHA256 = "913d7300ceae3b2dbc2c50d1de4baacab4be7b9380491c27fab7418616a16ec3"
EXTRACTED = "onnx"
ENV_URL = "MEMDIAG_MODEL_URL"  # a mirror serving the same archive (the checksum is still checked)
MAX_ARCHIVE = 512 << 20  # the real one is well under this; a runaway download stops here
TIMEOUT = 30.0

Progress = Callable[[int, "int | None"], None]  # (bytes so far, total or None)


@dataclass(frozen=True)
class FetchResult:
    """Where the model is now, and whether this run downloaded it."""

    model_dir: Path
    downloaded: bool
    url: str
    sha256: str
    size: int  # bytes of the archive (0 when nothing was downloaded)


def default_url() -> str:
    return os.environ.get(ENV_URL) or MODEL_URL


def fetch_model(
    target: Path | None = None,
    *,
    url: str | None = None,
    sha256: str | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> FetchResult:
    """Download, verify and unpack the model into ``target`` (default: Chroma's cache).

    Nothing is downloaded when ``target/onnx/`` already holds the six files (unless ``force``).
    Raises UnavailableError (no network, HTTP error) or InputError (checksum mismatch, an
    archive without the model files, a target that cannot be written); either way the target
    is as it was before.
    """
    target = (target or chroma_cache_dir()).expanduser()
    url = url or default_url()
    sha256 = sha256 or MODEL_SHA256
    if not force and has_model_files(target):
        return FetchResult(target, False, url, sha256, 0)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot create the model folder: {exc.strerror or exc}", path=clip(target, 200)
        ) from None
    fd, part = _temp_file(target)
    try:
        with os.fdopen(fd, "wb") as out:
            size, digest = _download(url, out, progress)
        if digest != sha256:
            raise InputError(
                f"the download from {clip(url, 120)} does not match chromadb's SHA256 "
                f"(expected {sha256}, got {digest}; {size} bytes): a corrupted download or "
                "another file; nothing was installed",
                path=None,
            )
        _unpack(Path(part), target)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(part)
    return FetchResult(target, True, url, sha256, size)


def _temp_file(target: Path) -> tuple[int, str]:
    try:
        return tempfile.mkstemp(prefix=f".{ARCHIVE_NAME}.", suffix=".part", dir=target)
    except OSError as exc:
        raise InputError(
            f"cannot write in the model folder: {exc.strerror or exc}", path=clip(target, 200)
        ) from None


def _download(url: str, out: object, progress: Progress | None) -> tuple[int, str]:
    """Stream ``url`` into ``out``; (bytes, sha256 hex). Network failures are one line."""
    import urllib.error
    import urllib.request

    if not url.startswith(("https://", "http://", "file://")):
        raise InputError(f"model URL must be https://, http:// or file://, got {clip(url, 120)!r}")
    digest = hashlib.sha256()
    size = 0
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "memdiag"})
        with urllib.request.urlopen(request, timeout=TIMEOUT) as resp:
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            if progress is not None:
                progress(0, total)
            while True:
                chunk = resp.read(1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_ARCHIVE:
                    raise InputError(
                        f"{clip(url, 120)} sends more than {MAX_ARCHIVE >> 20} MiB; not the model"
                    )
                digest.update(chunk)
                try:
                    out.write(chunk)  # type: ignore[attr-defined]
                except OSError as exc:  # the disk, not the network
                    raise InputError(
                        f"cannot write the download: {exc.strerror or exc}", path=ARCHIVE_NAME
                    ) from None
                if progress is not None:
                    progress(size, total)
    except urllib.error.HTTPError as exc:
        raise UnavailableError(
            f"cannot download the model from {clip(url, 120)}: HTTP {exc.code} {exc.reason}"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise UnavailableError(
            f"cannot download the model from {clip(url, 120)}: {clip(reason, 120)} (offline? "
            "copy the all-MiniLM-L6-v2 onnx/ folder from a machine that has it and set "
            "MEMDIAG_ONNX_MODEL_DIR to the folder holding it; docs/model.md)"
        ) from None
    return size, digest.hexdigest()


def _members(tar: tarfile.TarFile, name: str) -> list[tuple[tarfile.TarInfo, str]]:
    """The archive's regular files under ``onnx/``, checked: nothing outside, no links."""
    files: list[tuple[tarfile.TarInfo, str]] = []
    for m in tar.getmembers():
        p = PurePosixPath(m.name)
        parts = [x for x in p.parts if x not in ("", ".")]
        if p.is_absolute() or ".." in parts:
            raise InputError(
                f"the archive names a path outside its folder: {clip(m.name)!r}", path=name
            )
        if m.isdir():
            continue
        if not m.isfile():
            raise InputError(f"the archive holds a link or device: {clip(m.name)!r}", path=name)
        if len(parts) == 2 and parts[0] == EXTRACTED:
            files.append((m, parts[1]))
    return files


def _unpack(archive: Path, target: Path) -> None:
    """Unpack the archive's ``onnx/`` files into ``target/onnx`` in one rename."""
    name = ARCHIVE_NAME
    staging = Path(tempfile.mkdtemp(prefix=".onnx.", dir=target))
    old: Path | None = None
    try:
        try:
            with tarfile.open(archive, mode="r:gz") as tar:
                members = _members(tar, name)
                got = {n for _m, n in members}
                missing = [f for f in ONNX_FILES if f not in got]
                if missing:
                    raise InputError(
                        f"the archive lacks {', '.join(missing)} under {EXTRACTED}/", path=name
                    )
                for m, n in members:
                    src = tar.extractfile(m)
                    if src is None:  # pragma: no cover - a regular member always has data
                        continue
                    with src, open(staging / n, "wb") as dst:
                        shutil.copyfileobj(src, dst)
        except (tarfile.TarError, EOFError, OSError) as exc:
            reason = clip(exc, 120)
            raise InputError(f"not a readable .tar.gz archive: {reason}", path=name) from None
        final = target / EXTRACTED
        try:
            if final.exists():  # --force: the old copy stays until the new one is in place
                old = Path(tempfile.mkdtemp(prefix=".onnx-old.", dir=target))
                os.replace(final, old / EXTRACTED)
            try:
                os.replace(staging, final)
            except OSError:
                if old is not None:
                    os.replace(old / EXTRACTED, final)
                    old = None
                raise
        except OSError as exc:
            raise InputError(
                f"cannot install the model: {exc.strerror or exc}", path=clip(final, 200)
            ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
