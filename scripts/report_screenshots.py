"""The README's screenshots of the interactive report (docs/report-*.png), made from the demo.

    python scripts/report_screenshots.py            # writes docs/report-replay.png, -diagnose.png

Runs the real commands (`replay --html`, `diagnose --html`) on fixtures/demo.jsonl and opens the
pages in headless Chromium (Debian's chromium-headless-shell, or MEMDIAG_CHROMIUM) through
playwright-python. Chinese text needs a CJK font on the machine (Debian: fonts-noto-cjk).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from typer.testing import CliRunner  # noqa: E402

from memdiag.cli import app  # noqa: E402
from tests.browser import FLAGS, chromium_binary  # noqa: E402


def main() -> None:
    from playwright.sync_api import sync_playwright

    binary = chromium_binary()
    if binary is None:
        sys.exit("no Chromium: apt-get install -y chromium-headless-shell")
    os.chdir(ROOT)  # the report shows the path as given: keep it short
    demo = "fixtures/demo.jsonl"
    docs = ROOT / "docs"
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        replay, diagnose = Path(tmp) / "replay.html", Path(tmp) / "diagnose.html"
        for args in (
            ["replay", demo, "--strategy", "all", "--budget", "400", "--fact",
             "allergic to peanuts", "--fact", "prefers window seats", "--html", str(replay)],
            ["diagnose", demo, "--budget", "400", "--html", str(diagnose)],
        ):  # fmt: skip
            r = CliRunner().invoke(app, args)
            assert r.exit_code == 0, r.output
        browser = p.chromium.launch(executable_path=binary, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100}, device_scale_factor=1)
        # replay: the turn the 400-token sliding window evicts the allergy, a message hovered
        page.goto(replay.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.evaluate("memdiag.setTurn(6)")
        page.wait_for_timeout(200)
        page.locator(".col[data-strategy='sliding_window'] .left-rows .row").first.hover()
        page.wait_for_timeout(200)
        page.screenshot(path=str(docs / "report-replay.png"), full_page=False)
        # diagnose: the first verdict card clicked: the timeline at the failure, cause marked
        page.goto(diagnose.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.locator(".card[data-card='0'] h3").click()
        page.wait_for_timeout(300)
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(docs / "report-diagnose.png"), full_page=True)
        browser.close()
    print("wrote docs/report-replay.png and docs/report-diagnose.png")


if __name__ == "__main__":
    main()
