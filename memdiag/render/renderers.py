"""One renderer object per output format; each renders every command's result to stdout.

:class:`Renderer` names the commands; a format that misses one cannot be instantiated (and
``tests/test_render.py`` checks that every :class:`~memdiag.render.OutputFormat` has one).
"""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memdiag.checks import CheckReport
    from memdiag.diagnosis import Diagnosis
    from memdiag.replay import ReplayReport
    from memdiag.stores.audit import AuditReport


class Renderer(ABC):
    """Renders the result of each command (the names in ``memdiag.render.COMMANDS``)."""

    @abstractmethod
    def replay(self, report: ReplayReport, show: str) -> None: ...

    @abstractmethod
    def diagnose(self, transcript: str, diagnoses: Sequence[Diagnosis]) -> None: ...

    @abstractmethod
    def audit(self, report: AuditReport) -> None: ...

    @abstractmethod
    def check(self, report: CheckReport) -> None: ...


def _lines(lines: Iterable[str]) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")


def _document(obj: Any) -> None:
    from memdiag.render.jsonout import dumps

    sys.stdout.write(dumps(obj) + "\n")


def _compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


class TableRenderer(Renderer):
    """Rich tables and panels for people (`--format table`, the default)."""

    def _console(self) -> Any:
        from memdiag.render.console import stdout_console

        return stdout_console()

    def replay(self, report: ReplayReport, show: str) -> None:
        from memdiag.render.console import render_replay

        render_replay(self._console(), report, show)

    def diagnose(self, transcript: str, diagnoses: Sequence[Diagnosis]) -> None:
        from memdiag.render.console import render_diagnoses

        render_diagnoses(self._console(), transcript, diagnoses)

    def audit(self, report: AuditReport) -> None:
        from memdiag.render.audit_console import render_audit

        render_audit(self._console(), report)

    def check(self, report: CheckReport) -> None:
        from memdiag.render.console import render_checks

        render_checks(self._console(), report)


class JsonRenderer(Renderer):
    """One JSON document per run (docs/reference.md#commands)."""

    def replay(self, report: ReplayReport, show: str) -> None:
        from memdiag.render.jsonout import replay_json_chunks

        # streamed: a long replay's document is never built whole (same text as _document)
        write = sys.stdout.write
        for chunk in replay_json_chunks(
            report.transcript.path,
            report.encoding,
            report.budget,
            report.results,
            report.extra(),
        ):
            write(chunk)
        write("\n")

    def diagnose(self, transcript: str, diagnoses: Sequence[Diagnosis]) -> None:
        from memdiag.render.jsonout import diagnose_json

        _document(diagnose_json(transcript, diagnoses))

    def audit(self, report: AuditReport) -> None:
        from memdiag.render.jsonout import audit_json

        _document(audit_json(report))

    def check(self, report: CheckReport) -> None:
        from memdiag.render.jsonout import check_json

        _document(check_json(report))


class JsonlRenderer(Renderer):
    """One JSON object per line: a stream for long transcripts and big stores."""

    def replay(self, report: ReplayReport, show: str) -> None:
        from memdiag.render.jsonout import replay_jsonl

        _lines(replay_jsonl(report.results, report.extra()))

    def diagnose(self, transcript: str, diagnoses: Sequence[Diagnosis]) -> None:
        from memdiag.render.jsonout import diagnosis_json

        _lines(_compact(diagnosis_json(d)) for d in diagnoses)

    def audit(self, report: AuditReport) -> None:
        _lines(_compact(f.to_dict()) for f in report.findings)

    def check(self, report: CheckReport) -> None:
        from memdiag.render.jsonout import check_case_json

        _lines(_compact(check_case_json(c)) for c in report.cases)


# OutputFormat value → renderer (keyed by value: this module does not import the enum)
RENDERERS: dict[str, type[Renderer]] = {
    "table": TableRenderer,
    "json": JsonRenderer,
    "jsonl": JsonlRenderer,
}
