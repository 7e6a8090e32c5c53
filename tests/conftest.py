"""Test isolation: no test touches the real HOME or user caches; Chroma telemetry is off.
Property tests have no deadline: they assert results, never timing (benchmarks/ measures
time), so a slower machine than this one, CI's, cannot fail them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("memdiag", deadline=None)
settings.load_profile("memdiag")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


# Chroma's cache of the user running the tests (`memdiag fetch-model` puts the model there),
# read before the autouse fixture below points HOME at a temporary folder.
USER_CHROMA_MODEL = Path.home() / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2"
NO_MODEL = (
    "no offline embedding model all-MiniLM-L6-v2: run `memdiag fetch-model` (into Chroma's "
    "cache), or set MEMDIAG_ONNX_MODEL_DIR to a folder holding onnx/model.onnx"
)


def onnx_model_dir() -> Path | None:
    """The offline MiniLM model: MEMDIAG_ONNX_MODEL_DIR, the user's Chroma cache, or ../shared
    beside the checkout (a developer's copy; a fresh clone has none of them)."""
    env = os.environ.get("MEMDIAG_ONNX_MODEL_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(USER_CHROMA_MODEL)
    candidates.append(ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2")
    for c in candidates:
        if (c / "onnx" / "model.onnx").is_file():
            return c
    return None


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    # memdiag's user cache lands under this HOME (shared by the session, as on a real machine)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("MEMDIAG_CACHE_DIR", raising=False)
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    # the embedding cache of the evidence ranking: under the tmp HOME, whatever XDG says
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(home / ".cache" / "memdiag"))
    model = onnx_model_dir()
    if model is not None:
        monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", str(model))


@pytest.fixture
def model_dir() -> Path:
    """The embedding model, or a skip that says why (CI turns such skips into failures)."""
    d = onnx_model_dir()
    if d is None:
        pytest.skip(NO_MODEL)
    return d


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    """Under MEMDIAG_REQUIRE_ALL (CI), a skipped test is a failure: CI has every dependency."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("MEMDIAG_REQUIRE_ALL") and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped, but MEMDIAG_REQUIRE_ALL forbids skips: {reason}"


# --- network guard (docs/reference.md#safety): the suite may talk to loopback only
# -------------------------------

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
OUTSIDE_ATTEMPTS: list[str] = []


def _is_loopback(host: object) -> bool:
    import ipaddress

    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).strip("[]").split("%")[0]
    if host in _LOOPBACK_NAMES or host == "":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _network_guard(event: str, args: tuple) -> None:  # type: ignore[type-arg]
    """Refuse any connection or name lookup that is not loopback, and remember it."""
    if event == "socket.connect":
        _sock, address = args
        if not isinstance(address, tuple):  # AF_UNIX paths are local
            return
        host = address[0]
    elif event == "socket.getaddrinfo":
        host = args[0]
    else:
        return
    if not _is_loopback(host):
        OUTSIDE_ATTEMPTS.append(f"{event} {host!r}")
        raise ConnectionRefusedError(f"memdiag tests: no network beyond loopback ({host!r})")


def pytest_configure(config: pytest.Config) -> None:
    import sys

    sys.addaudithook(_network_guard)
