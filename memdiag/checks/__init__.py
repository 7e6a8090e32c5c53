"""`memdiag check` (docs/reference.md#checks): memory regression checks from a YAML spec, for CI.

:mod:`.spec` parses and validates the spec (every error names ``file:line``, before any case
runs); :mod:`.run` runs the cases (``--jobs`` in worker processes) into frozen results.
"""

from memdiag.checks.run import CaseResult, CheckReport, check, run_case, run_checks
from memdiag.checks.spec import FINDING_KINDS, Case, CheckSpec, Expectation, load_spec

__all__ = [
    "FINDING_KINDS",
    "Case",
    "CaseResult",
    "CheckReport",
    "CheckSpec",
    "Expectation",
    "check",
    "load_spec",
    "run_case",
    "run_checks",
]
