"""memdiag's pytest plugin: memory-check specs collected as tests, one test per case.

Installed with memdiag (the ``pytest11`` entry point ``memdiag``), so a project's own ``pytest``
runs its memory regression checks beside its unit tests: every ``memdiag-checks*.yaml`` file
pytest meets is a test file and each of its cases a test item, named by the case, failing with
the case's messages at their spec lines, the same as `memdiag check` (docs/ci.md).

The file patterns are the ini option ``memdiag_checks``; ``-p no:memdiag`` turns the plugin off.
Only pytest imports this module: memdiag itself never imports pytest.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from memdiag.checks.run import CaseResult
    from memdiag.checks.spec import Case

DEFAULT_PATTERNS = ["memdiag-checks*.yaml", "memdiag-checks*.yml"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "memdiag_checks",
        type="args",
        default=DEFAULT_PATTERNS,
        help="file name patterns of memdiag check specs to collect (memdiag-checks*.yaml)",
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    patterns = parent.config.getini("memdiag_checks")
    if any(fnmatch.fnmatch(file_path.name, p) for p in patterns):
        return CheckSpecFile.from_parent(parent, path=file_path)
    return None


class CaseFailed(Exception):
    """A case whose expectations did not hold (its result says which, at which lines)."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.name)
        self.result = result


class CheckSpecFile(pytest.File):
    """A memdiag check spec: its cases are the tests. An invalid spec is a collection error of
    one line (the message `memdiag check` prints), never a traceback."""

    def collect(self) -> Iterator[pytest.Item]:
        from memdiag.checks.spec import load_spec
        from memdiag.config import load_settings
        from memdiag.errors import MemdiagError
        from memdiag.strategies import validate_settings

        try:
            # the config that applies where the spec is (memdiag.yaml, pyproject.toml)
            base = validate_settings(load_settings(start=self.path.parent))
            spec = load_spec(self.path, base)
        except MemdiagError as exc:
            raise self.CollectError(f"memdiag: {exc}") from None
        for case in spec.cases:
            yield CheckCase.from_parent(self, name=case.name, case=case)

    def setup(self) -> None:
        """The cases of the spec read, count and index each transcript once (as `memdiag
        check` does), until the last of them has run (``teardown``)."""
        import contextlib

        from memdiag.checks.run import reads_shared

        self._shared = contextlib.ExitStack()
        self._shared.enter_context(reads_shared())

    def teardown(self) -> None:
        shared = getattr(self, "_shared", None)
        if shared is not None:
            shared.close()


class CheckCase(pytest.Item):
    """One case of a spec, run as `memdiag check` runs it."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        from memdiag.checks.run import run_case

        result = run_case(self.case, str(self.path))
        if not result.passed:
            raise CaseFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        from memdiag.errors import MemdiagError

        exc = excinfo.value
        if isinstance(exc, CaseFailed):
            r = exc.result
            return "\n".join(
                f"{self.path}:{line}: {message}"
                for line, message in zip(r.failure_lines, r.failures, strict=True)
            )
        if isinstance(exc, MemdiagError):  # found only when running (a turn past the end)
            return f"memdiag: {exc}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"memdiag case {self.case.name!r}"
