"""Fuzz profiles and figures.

Two profiles, chosen by ``MEMDIAG_FUZZ``:

- ``quick`` (default): a few examples per target, derandomized, in every test run;
- ``long``: at least 10,000 inputs over all targets, random (the documented command is in the
  README, "Development"): ``MEMDIAG_FUZZ=long python -m pytest -q tests/fuzz``.

With ``MEMDIAG_FUZZ_STATS=FILE`` the run writes its figures there as JSON: inputs per kind, the
exit codes seen per kind and the tracebacks found (the target is 0).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from tests.fuzz.harness import STATS


@pytest.fixture(scope="session", autouse=True)
def _fuzz_figures() -> Iterator[None]:
    yield
    path = os.environ.get("MEMDIAG_FUZZ_STATS")
    if path:
        with open(path, "w", encoding="utf-8") as fp:
            json.dump(STATS.as_dict(), fp, indent=2, sort_keys=True)
