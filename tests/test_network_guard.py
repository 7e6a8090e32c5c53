"""The suite runs with every non-loopback connection refused (tests/conftest.py), and every
command on every fixture opens none (docs/reference.md#safety: no network unless the user
configures one)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from tests import conftest
from tests.conftest import FIXTURES


def test_guard_refuses_outside_and_allows_loopback() -> None:
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("192.0.2.1", 80), timeout=1)  # TEST-NET-1, never routed
    with pytest.raises(ConnectionRefusedError):
        socket.getaddrinfo("example.com", 443)
    conftest.OUTSIDE_ATTEMPTS.clear()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        socket.create_connection(server.getsockname(), timeout=1).close()
    finally:
        server.close()
    assert conftest.OUTSIDE_ATTEMPTS == []


def _commands() -> list[list[str]]:
    cmds: list[list[str]] = []
    for t in sorted(FIXTURES.glob("*.jsonl")) + sorted((FIXTURES / "formats").glob("*.*")):
        cmds.append(["replay", str(t), "--strategy", "all", "--budget", "400"])
        cmds.append(["diagnose", str(t), "--budget", "400"])
    for facts in sorted(FIXTURES.glob("*facts*.json")):
        cmds.append(["inspect-store", "--facts-file", str(facts)])
    cmds.append(["check", str(FIXTURES / "checks.yaml")])
    return cmds


@pytest.mark.parametrize("argv", _commands(), ids=lambda a: " ".join(Path(x).name for x in a[:2]))
def test_commands_open_no_outside_connection(argv: list[str]) -> None:
    conftest.OUTSIDE_ATTEMPTS.clear()
    result = CliRunner().invoke(app, argv)
    assert result.exit_code in (0, 1, 2), result.output
    assert conftest.OUTSIDE_ATTEMPTS == []
