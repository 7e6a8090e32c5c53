"""A real Chromium for the report tests: Debian's chromium-headless-shell (or chromium) driven by
playwright-python through ``executable_path`` (no browser download: ``playwright install`` is
never needed). CI installs it with ``apt-get install -y chromium-headless-shell``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BINARIES = ("chromium-headless-shell", "chromium", "chromium-browser")
# Flags that work as root in a container, with nothing started that talks to the network.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_binary() -> str | None:
    """MEMDIAG_CHROMIUM, else the first Debian Chromium binary on PATH."""
    env = os.environ.get("MEMDIAG_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


def missing_reason() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if chromium_binary() is None:
        return (
            "no Chromium: apt-get install -y chromium-headless-shell "
            "(or set MEMDIAG_CHROMIUM to a Chromium binary)"
        )
    return None


@dataclass
class PageLog:
    """Everything a page did that a report must not do."""

    requests: list[str] = field(default_factory=list)  # every URL other than the file itself
    errors: list[str] = field(default_factory=list)  # page errors and console errors
    dialogs: list[str] = field(default_factory=list)  # alert/confirm/prompt (injected code)


@contextmanager
def launch() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    binary = chromium_binary()
    assert binary is not None
    with tempfile.TemporaryDirectory(prefix="memdiag-chromium-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=binary,
            headless=True,
            args=FLAGS,
            viewport={"width": 1400, "height": 1000},
            service_workers="block",
        )
        try:
            yield context
        finally:
            context.close()


def open_report(context: Any, path: Path, log: PageLog) -> Any:
    """Open ``path`` from disk; every other request is recorded and refused."""
    page = context.new_page()
    own = path.resolve().as_uri()

    def route(r: Any) -> None:
        url = r.request.url
        if url.split("#")[0] == own:
            r.continue_()
        else:
            log.requests.append(url)
            r.abort()

    page.route("**/*", route)
    page.on(
        "request",
        lambda req: None if req.url.split("#")[0] == own else log.requests.append(req.url),
    )
    page.on("pageerror", lambda exc: log.errors.append(f"pageerror: {exc}"))
    page.on(
        "console",
        lambda msg: log.errors.append(f"console: {msg.text}") if msg.type == "error" else None,
    )

    def on_dialog(d: Any) -> None:
        log.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    page.goto(own)
    page.wait_for_selector("body[data-ready='1']", timeout=15000)
    return page
