"""Citations of the project's own docs resolve: every `docs/FILE.md#anchor` that the code, the
schemas and the docs name exists in that file (an explicit `<a id>` or a heading)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITATION = re.compile(r"docs/([a-z0-9_-]+\.md)#([a-z0-9_-]+)")


def _anchors(doc: Path) -> set[str]:
    text = doc.read_text(encoding="utf-8")
    explicit = set(re.findall(r'<a id="([a-z0-9_-]+)"></a>', text))
    headings = {
        re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", text, re.M)
    }
    return explicit | headings


def test_every_cited_anchor_exists() -> None:
    sources = [*ROOT.glob("memdiag/**/*.py"), *ROOT.glob("memdiag/schemas/*.json")]
    sources += [*ROOT.glob("docs/*.md"), ROOT / "README.md"]
    cited: dict[tuple[str, str], str] = {}
    for src in sources:
        for doc, anchor in CITATION.findall(src.read_text(encoding="utf-8")):
            cited.setdefault((doc, anchor), str(src.relative_to(ROOT)))
    assert cited, "no citation found: the pattern is wrong"
    missing = [
        f"{where}: docs/{doc}#{anchor}"
        for (doc, anchor), where in sorted(cited.items())
        if not (ROOT / "docs" / doc).is_file() or anchor not in _anchors(ROOT / "docs" / doc)
    ]
    assert not missing, missing


def test_the_reference_names_every_verdict_and_finding_kind() -> None:
    from memdiag.diagnosis.verdicts import Verdict
    from memdiag.stores.audit.report import KINDS

    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    for name in [v.value for v in Verdict] + list(KINDS):
        assert f"| `{name}` |" in text, name
