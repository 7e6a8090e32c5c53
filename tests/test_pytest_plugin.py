"""The pytest plugin on a sample project (pytester): specs collected, one test per case,
failures with the case's messages at their spec lines; memdiag never imports pytest itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT

pytest_plugins = ["pytester"]

DEMO = FIXTURES / "demo.jsonl"
SPEC = f"""version: 1
defaults:
  transcript: {DEMO}
  strategy: {{name: sliding_window, budget: 400}}
cases:
  - name: allergy kept early
    expect:
      - kept: allergic to peanuts
        at_turn: 3
  - name: allergy kept to the failure
    expect:
      - kept: allergic to peanuts
        at_turn: 8
  - name: facts file holds the city
    store: {{facts_file: {FIXTURES / "facts.json"}}}
    expect:
      - fact_key: city
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # the plugin is loaded by -p below, whether or not memdiag is pip-installed (where its
    # entry point would load it a second time); each run is a real pytest process
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makefile(".py", test_unit="def test_unit():\n    assert 1 + 1 == 2\n")
    (pytester.path / "memdiag-checks.yaml").write_text(SPEC, encoding="utf-8")
    return pytester


def test_each_case_is_a_test_and_fails_with_its_messages(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("-p", "memdiag.pytest_plugin", "-v")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "memdiag-checks.yaml::allergy kept early PASSED*",
            "memdiag-checks.yaml::allergy kept to the failure FAILED*",
            "memdiag-checks.yaml::facts file holds the city PASSED*",
            "test_unit.py::test_unit PASSED*",
        ]
    )
    # the failure is the case's own message at its expectation's line, as `memdiag check` says
    spec = project.path / "memdiag-checks.yaml"
    result.stdout.fnmatch_lines(
        [f"{spec}:12: kept 'allergic to peanuts' at turn 8 *: lost at turn 6 (evicted)"]
    )
    assert "Traceback" not in result.stdout.str()


def test_the_same_verdicts_as_memdiag_check(project: pytest.Pytester) -> None:
    import json

    from typer.testing import CliRunner

    from memdiag.cli import app

    spec = project.path / "memdiag-checks.yaml"
    r = CliRunner().invoke(app, ["check", str(spec), "--format", "json"])
    cases = json.loads(r.stdout)["cases"]
    result = project.runpytest_subprocess("-p", "memdiag.pytest_plugin", "-k", "not unit")
    result.assert_outcomes(
        passed=sum(c["passed"] for c in cases), failed=sum(not c["passed"] for c in cases)
    )
    for c in cases:
        for line, message in zip(c["failure_lines"], c["failures"], strict=True):
            assert f"{spec}:{line}: {message}" in result.stdout.str()


def test_an_invalid_spec_is_one_collection_error(project: pytest.Pytester) -> None:
    (project.path / "memdiag-checks-broken.yaml").write_text(
        "version: 1\ncases:\n  - name: x\n    expect:\n      - kep: y\n", encoding="utf-8"
    )
    # as for any test file that cannot be collected, pytest stops before running tests
    result = project.runpytest_subprocess("-p", "memdiag.pytest_plugin")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*memdiag: *memdiag-checks-broken.yaml:5: unknown key 'kep'*"])
    assert "Traceback" not in result.stdout.str()


def test_file_name_patterns(project: pytest.Pytester) -> None:
    (project.path / "memdiag-checks.yaml").rename(project.path / "memory.yaml")
    result = project.runpytest_subprocess("-p", "memdiag.pytest_plugin")
    result.assert_outcomes(passed=1)  # not a spec name: not collected
    project.makeini("[pytest]\nmemdiag_checks = memory.yaml\n")
    result = project.runpytest_subprocess("-p", "memdiag.pytest_plugin")
    result.assert_outcomes(passed=3, failed=1)


def test_the_project_config_applies(project: pytest.Pytester) -> None:
    # a bigger budget in the project's pyproject.toml keeps the allergy to the end
    project.makepyprojecttoml("[tool.memdiag]\nbudget = 4000\n")
    spec = SPEC.replace("  strategy: {name: sliding_window, budget: 400}\n", "")
    (project.path / "memdiag-checks.yaml").write_text(spec, encoding="utf-8")
    result = project.runpytest_subprocess("-p", "memdiag.pytest_plugin")
    result.assert_outcomes(passed=4)


def test_the_entry_point_is_declared() -> None:
    try:
        import tomllib
    except ImportError:  # Python 3.10: memdiag depends on tomli there
        import tomli as tomllib  # type: ignore[no-redef]

    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert eps["pytest11"] == {"memdiag": "memdiag.pytest_plugin"}


def test_the_installed_entry_point_loads_the_plugin(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip-installed memdiag: plain `pytest` runs the specs, `-p no:memdiag` turns them off."""
    from importlib.metadata import distributions

    # an install's metadata lives in site-packages; a memdiag.egg-info left in the checkout by
    # an earlier build (found through PYTHONPATH) is not an install of this code
    installed = [
        d for d in distributions(name="memdiag") if Path(str(d.locate_file(""))).resolve() != ROOT
    ]
    if not installed:
        pytest.skip("memdiag is not pip-installed here (a PYTHONPATH checkout): no entry points")
    eps = [ep for ep in installed[0].entry_points if ep.group == "pytest11"]
    assert [(ep.name, ep.value) for ep in eps] == [("memdiag", "memdiag.pytest_plugin")]
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    (pytester.path / "memdiag-checks.yaml").write_text(SPEC, encoding="utf-8")
    pytester.runpytest_subprocess().assert_outcomes(passed=2, failed=1)
    pytester.runpytest_subprocess("-p", "no:memdiag").assert_outcomes()


def test_memdiag_never_imports_pytest() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from memdiag.cli import app\n"
        f"r = CliRunner().invoke(app, ['check', {str(FIXTURES / 'checks.yaml')!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('pytest' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "False"
    # and no memdiag module but the plugin names it
    offenders = [
        p.relative_to(ROOT)
        for p in (ROOT / "memdiag").rglob("*.py")
        if p.name != "pytest_plugin.py" and "import pytest" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_the_cases_of_a_spec_read_its_transcript_once(project: pytest.Pytester) -> None:
    """As `memdiag check`, the plugin's cases of one spec file share what they read: the
    transcript they all name is read once, and nothing is kept after the file's last case."""
    project.makeconftest(
        """
import memdiag.transcript as tr
import memdiag.checks.run as run
reads = []
real = tr.load
tr.load = lambda path, **k: reads.append(str(path)) or real(path, **k)

def pytest_sessionfinish(session):
    print(f"\\nREADS {len(reads)} KEPT {run._READ is not None}")
"""
    )
    result = project.runpytest_subprocess("-p", "memdiag.pytest_plugin", "-s", "-k", "kept")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*READS 1 KEPT False*"])
