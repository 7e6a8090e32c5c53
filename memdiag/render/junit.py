"""Outputs CI servers read for `memdiag check`: JUnit XML and GitHub Actions annotations.

The JUnit document follows the shape pytest writes (``<testsuites>`` around one
``<testsuite>``), which Jenkins, GitLab, Azure DevOps, CircleCI and the common GitHub Actions
test reporters all accept.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from memdiag.checks import CheckReport

# Characters XML 1.0 cannot hold at all (not even escaped); transcript text may contain them.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _INVALID_XML.sub("\ufffd", text)


def _classname(spec: str) -> str:
    # Reporters group by classname and treat dots as package separators.
    stem = Path(spec).stem if spec else "checks"
    return "memdiag." + re.sub(r"[^\w-]+", "_", stem)


def junit_xml(report: CheckReport) -> ET.ElementTree:
    """One ``<testsuite name="memdiag">``; one ``<testcase>`` per case, failures explained."""
    total = sum(c.duration_s for c in report.cases)
    suites = ET.Element(
        "testsuites",
        name="memdiag",
        tests=str(len(report.cases)),
        failures=str(report.failed),
        errors="0",
        time=f"{total:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="memdiag",
        tests=str(len(report.cases)),
        failures=str(report.failed),
        errors="0",
        skipped="0",
        time=f"{total:.3f}",
    )
    classname = _classname(report.spec)
    for case in report.cases:
        tc = ET.SubElement(
            suite,
            "testcase",
            classname=classname,
            name=_clean(case.name),
            time=f"{case.duration_s:.3f}",
            file=report.spec,
            line=str(case.line),
        )
        if case.passed:
            continue
        first = case.failures[0] if case.failures else "failed"
        more = f" (+{len(case.failures) - 1} more)" if len(case.failures) > 1 else ""
        failure = ET.SubElement(tc, "failure", message=_clean(first + more), type="memdiag.check")
        failure.text = _clean(
            "\n".join(
                f"{report.spec}:{line}: {text}"
                for text, line in zip(case.failures, case.failure_lines, strict=True)
            )
        )
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(report: CheckReport, path: Path) -> None:
    """Write the JUnit file atomically (a CI step never reads a half-written report)."""
    from memdiag.render.common import atomic_open

    # atomic_open also creates the folder: `--junit build/report.xml` on a clean tree
    with atomic_open(path, "wb") as fp:
        junit_xml(report).write(fp, encoding="utf-8", xml_declaration=True)


def _escape_data(text: str) -> str:
    # GitHub's workflow-command escaping (actions/toolkit `escapeData`).
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: CheckReport) -> list[str]:
    """``::error file=SPEC,line=N::message``, one per failing expectation, at its spec line."""
    out = []
    for case in report.cases:
        for text, line in zip(case.failures, case.failure_lines, strict=True):
            out.append(
                f"::error file={_escape_property(report.spec)},line={line}::"
                + _escape_data(f"{case.name}: {text}")
            )
    return out
