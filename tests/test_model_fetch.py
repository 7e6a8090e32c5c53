"""`memdiag fetch-model`: chromadb's archive, verified, unpacked whole or not at all; and a run
without the model names it once.

No test reaches the network: archives made here are served by http.server on 127.0.0.1 or read
from file:// URLs, and the network guard in conftest refuses anything else.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import socket
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.errors import InputError, UnavailableError
from memdiag.stores import model_fetch
from memdiag.stores.embeddings import ONNX_FILES, chroma_cache_dir, find_model_dir
from memdiag.stores.model_fetch import fetch_model
from tests.conftest import FIXTURES

runner = CliRunner()


@pytest.fixture(autouse=True)
def _own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own HOME: a tiny fake model in the session's Chroma cache would be found
    by every later test. No MEMDIAG_ONNX_MODEL_DIR: Chroma's cache is where memdiag looks."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MEMDIAG_ONNX_MODEL_DIR", raising=False)


def make_archive(path: Path, files: dict[str, bytes] | None = None) -> str:
    """A .tar.gz laid out as chromadb's (onnx/<six files>); returns its SHA256."""
    if files is None:
        files = {f"onnx/{name}": f"{name} of a tiny test model\n".encode() for name in ONNX_FILES}
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Server:
    def __init__(self, root: Path) -> None:
        self.requests: list[str] = []
        log = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **k):  # type: ignore[no-untyped-def]
                super().__init__(*a, directory=str(root), **k)

            def log_message(self, fmt, *args):  # type: ignore[no-untyped-def]
                log.append(self.path)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    root = tmp_path / "served"
    root.mkdir()
    s = _Server(root)
    try:
        yield s
    finally:
        s.httpd.shutdown()
        s.httpd.server_close()


def leftovers(folder: Path) -> list[str]:
    """Temporary files or folders a fetch may have left (none, whatever happened)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_the_url_archive_and_checksum_are_chromadbs() -> None:
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2 as Onnx

    assert model_fetch.MODEL_URL == Onnx.MODEL_DOWNLOAD_URL
    assert model_fetch.ARCHIVE_NAME == Onnx.ARCHIVE_FILENAME
    assert model_fetch.MODEL_SHA256 == Onnx._MODEL_SHA256
    assert model_fetch.EXTRACTED == Onnx.EXTRACTED_FOLDER_NAME
    assert Path.home() / ".cache" / "chroma" / "onnx_models" / Onnx.MODEL_NAME == (
        chroma_cache_dir()
    )


def test_download_verify_unpack_over_http(server: _Server, tmp_path: Path) -> None:
    sha = make_archive(tmp_path / "served" / "onnx.tar.gz")
    target = tmp_path / "model"
    seen: list[tuple[int, int | None]] = []
    result = fetch_model(
        target, url=server.url("onnx.tar.gz"), sha256=sha, progress=lambda d, t: seen.append((d, t))
    )
    assert result.downloaded and result.model_dir == target
    assert sorted(p.name for p in (target / "onnx").iterdir()) == sorted(ONNX_FILES)
    assert (target / "onnx" / "vocab.txt").read_bytes() == b"vocab.txt of a tiny test model\n"
    assert leftovers(target) == []
    size = (tmp_path / "served" / "onnx.tar.gz").stat().st_size
    assert result.size == size and seen[-1] == (size, size)  # the bar reaches its total
    # already there: no second request
    again = fetch_model(target, url=server.url("onnx.tar.gz"), sha256=sha)
    assert not again.downloaded and server.requests == ["/onnx.tar.gz"]


def test_file_url_and_default_target_is_chromas_cache(tmp_path: Path) -> None:
    archive = tmp_path / "onnx.tar.gz"
    sha = make_archive(archive)
    result = fetch_model(url=archive.as_uri(), sha256=sha)
    assert result.model_dir == chroma_cache_dir()
    assert find_model_dir() == (chroma_cache_dir(), "")  # where memdiag and chromadb look


def test_checksum_mismatch_is_one_line_exit_2_and_installs_nothing(
    server: _Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_archive(tmp_path / "served" / "onnx.tar.gz")  # not chromadb's archive
    monkeypatch.setenv("MEMDIAG_MODEL_URL", server.url("onnx.tar.gz"))
    target = tmp_path / "model"
    r = runner.invoke(app, ["fetch-model", "--dir", str(target)])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("downloading all-MiniLM-L6-v2 from http://")
    assert "does not match chromadb's SHA256" in lines[1]
    assert model_fetch.MODEL_SHA256 in lines[1] and "nothing was installed" in lines[1]
    assert not (target / "onnx").exists() and leftovers(target) == []
    assert "Traceback" not in r.output


def test_force_that_fails_keeps_the_old_copy(server: _Server, tmp_path: Path) -> None:
    target = tmp_path / "model"
    (target / "onnx").mkdir(parents=True)
    for name in ONNX_FILES:
        (target / "onnx" / name).write_text("old")
    make_archive(tmp_path / "served" / "onnx.tar.gz")
    with pytest.raises(InputError, match="does not match"):
        fetch_model(target, url=server.url("onnx.tar.gz"), force=True)
    assert all((target / "onnx" / n).read_text() == "old" for n in ONNX_FILES)
    assert leftovers(target) == []


def test_force_replaces_the_old_copy(server: _Server, tmp_path: Path) -> None:
    target = tmp_path / "model"
    (target / "onnx").mkdir(parents=True)
    (target / "onnx" / "model.onnx").write_text("old")
    sha = make_archive(tmp_path / "served" / "onnx.tar.gz")
    fetch_model(target, url=server.url("onnx.tar.gz"), sha256=sha, force=True)
    assert (target / "onnx" / "model.onnx").read_bytes() == b"model.onnx of a tiny test model\n"
    assert leftovers(target) == []


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_offline_is_a_clear_error_exit_2(tmp_path: Path) -> None:
    target = tmp_path / "model"
    url = f"http://127.0.0.1:{_closed_port()}/onnx.tar.gz"
    r = runner.invoke(app, ["fetch-model", "--dir", str(target), "--url", url])
    assert r.exit_code == 2, r.output
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"memdiag: cannot download the model from {url}: ")
    assert "offline?" in last and "MEMDIAG_ONNX_MODEL_DIR" in last
    assert not (target / "onnx").exists() and leftovers(target) == []


def test_http_error_names_the_status(server: _Server, tmp_path: Path) -> None:
    with pytest.raises(UnavailableError, match="HTTP 404"):
        fetch_model(tmp_path / "m", url=server.url("missing.tar.gz"))
    assert leftovers(tmp_path / "m") == []


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"onnx/model.onnx": b"x"}, "lacks config.json"),
        ({"../evil": b"x", **{f"onnx/{n}": b"x" for n in ONNX_FILES}}, "outside its folder"),
        ({"/etc/evil": b"x"}, "outside its folder"),
    ],
)
def test_bad_archives_install_nothing(
    tmp_path: Path, files: dict[str, bytes], message: str
) -> None:
    archive = tmp_path / "a.tar.gz"
    sha = make_archive(archive, files)
    target = tmp_path / "inner" / "model"
    with pytest.raises(InputError, match=message):
        fetch_model(target, url=archive.as_uri(), sha256=sha)
    assert not (target / "onnx").exists() and leftovers(target) == []
    assert not (tmp_path / "inner" / "evil").exists()


def test_a_link_in_the_archive_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("onnx/model.onnx")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tar.addfile(info)
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    with pytest.raises(InputError, match="link or device"):
        fetch_model(tmp_path / "m", url=archive.as_uri(), sha256=sha)


def test_cli_installs_and_prints_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "onnx.tar.gz"
    monkeypatch.setattr(model_fetch, "MODEL_SHA256", make_archive(archive))
    monkeypatch.setenv("MEMDIAG_MODEL_URL", archive.as_uri())
    r = runner.invoke(app, ["fetch-model"])
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == str(chroma_cache_dir())
    assert "SHA256 verified" in r.stderr
    r = runner.invoke(app, ["fetch-model"])
    assert r.exit_code == 0 and "already in" in r.stderr


def test_unknown_url_scheme_is_exit_2(tmp_path: Path) -> None:
    r = runner.invoke(app, ["fetch-model", "--dir", str(tmp_path), "--url", "ftp://x/onnx.tar.gz"])
    assert r.exit_code == 2 and "must be https://, http:// or file://" in r.stderr


# --- a run without the model names it once ----------------------------------------------------


def _no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", str(tmp_path / "no-model"))


NOTE = "note: the embedding model all-MiniLM-L6-v2 was not found"


def test_diagnose_without_the_model_names_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_model(monkeypatch, tmp_path)
    stores = FIXTURES / "stores"
    r = runner.invoke(
        app,
        ["diagnose", str(stores / "conversation.jsonl"), "--chroma", str(stores / "chroma")],
    )
    assert r.exit_code == 0, r.output
    assert r.stderr.count(NOTE) == 1 and r.stderr.count("memdiag fetch-model") == 1
    assert str(tmp_path / "no-model") in r.stderr  # where it looked, said once
    assert str(tmp_path / "no-model") not in r.stdout
    # the next run in the same process says it again (once per run, not per process)
    r = runner.invoke(app, ["diagnose", str(FIXTURES / "demo.jsonl"), "--budget", "400"])
    assert r.stderr.count(NOTE) == 1


def test_check_with_jobs_names_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_model(monkeypatch, tmp_path)
    r = runner.invoke(app, ["check", str(FIXTURES / "checks.yaml"), "--jobs", "2"])
    assert r.exit_code == 0, r.output
    assert r.stderr.count(NOTE) == 1


def test_a_run_that_needs_no_model_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_model(monkeypatch, tmp_path)
    r = runner.invoke(app, ["replay", str(FIXTURES / "demo.jsonl"), "--budget", "400"])
    assert r.exit_code == 0 and NOTE not in r.stderr
