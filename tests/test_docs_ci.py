"""docs/ci.md's GitHub job installs memdiag with a line that works: memdiag is not on PyPI, so
the job names it as a direct reference to its git repository (pip's `name @ git+URL@REF`)."""

from __future__ import annotations

import shlex

from tests.conftest import ROOT

CI_DOC = ROOT / "docs" / "ci.md"


def _install_line() -> str:
    job = CI_DOC.read_text(encoding="utf-8").split("## GitHub Actions", 1)[1].split("\n## ", 1)[0]
    lines = [ln.strip() for ln in job.splitlines() if ln.strip().startswith("run: pip install")]
    assert len(lines) == 1, lines
    return lines[0].removeprefix("run: ")


def test_the_job_installs_memdiag_from_git_pinned() -> None:
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip vendors the same parser pip itself uses on this line
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]

    words = shlex.split(_install_line())
    assert words[:2] == ["pip", "install"] and len(words) == 3, words
    req = Requirement(words[2])  # raises on a line pip would refuse
    assert req.name == "memdiag"  # `pip install memdiag` fails: memdiag is not on PyPI
    assert req.url is not None and req.url.startswith("git+https://")
    ref = req.url.rsplit("@", 1)[-1]
    assert ref and "/" not in ref  # pinned to a tag or commit: every run checks the same memdiag
