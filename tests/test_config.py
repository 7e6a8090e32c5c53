from __future__ import annotations

import dataclasses

import pytest

from memdiag.config import Settings, SummarySettings, load_settings
from memdiag.errors import InputError, UsageError
from memdiag.strategies import validate_settings
from tests.conftest import ROOT


def _leaves(obj, prefix=""):
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from _leaves(value, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}"


def test_example_config_documents_every_setting():
    example = load_settings(ROOT / "config.example.yaml")
    assert dataclasses.replace(example, source=None) == Settings()
    text = (ROOT / "config.example.yaml").read_text()
    for leaf in _leaves(Settings()):
        if leaf == "source":
            continue
        assert leaf.rsplit(".", 1)[-1] + ":" in text, leaf


def test_unknown_key_names_line(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("budget: 100\nsummary:\n  sumary_max_tokens: 5\n")
    with pytest.raises(InputError) as exc:
        load_settings(p)
    assert str(exc.value).startswith(f"{p}:3: unknown key 'sumary_max_tokens'")
    assert "did you mean 'summary_max_tokens'" in str(exc.value)


def test_wrong_type_names_line(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("strategy: summary\nbudget: lots\n")
    with pytest.raises(InputError, match=r"m.yaml:2: budget must be an integer"):
        load_settings(p)


def test_unsafe_yaml_rejected(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("budget: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(InputError, match="invalid YAML"):
        load_settings(p)


def test_flags_override_file(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("budget: 100\nstore:\n  top_k: 3\n")
    s = load_settings(p).with_overrides(
        budget=50, **{"store.top_k": None, "summary.summary_max_tokens": 9}
    )
    assert s.budget == 50 and s.store.top_k == 3 and s.summary.summary_max_tokens == 9


def test_validate_rejects_bad_values():
    with pytest.raises(UsageError, match="budget"):
        Settings(budget=0).validate()
    with pytest.raises(UsageError, match="unknown strategy 'lru'"):
        validate_settings(Settings(strategy="lru"))
    with pytest.raises(UsageError, match="unknown summarizer 'abstractive'"):
        validate_settings(Settings(summary=SummarySettings(summarizer="abstractive")))
    # the schema alone does not know the registries' names
    assert Settings(strategy="lru").validate().strategy == "lru"


def test_default_budget_is_context_minus_reserve():
    assert Settings(model="gpt-4").effective_budget() == 8192 - 4096


def test_duplicate_key_names_line(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("budget: 100\nstrategy: summary\nbudget: 200\n")
    with pytest.raises(InputError, match=r"m.yaml:3: invalid YAML: duplicate key 'budget'"):
        load_settings(p)


# --- where the config is found: here or in a parent, memdiag.yaml or pyproject.toml ------------


def _tree(tmp_path):
    project = tmp_path / "project"
    deep = project / "agents" / "travel"
    deep.mkdir(parents=True)
    return project, deep


def test_memdiag_yaml_in_a_parent_applies_with_paths_relative_to_it(tmp_path, monkeypatch):
    from memdiag.config import find_config

    project, deep = _tree(tmp_path)
    (project / "memdiag.yaml").write_text(
        "budget: 321\nstore:\n  facts_file: memory/facts.json\n  chroma: http://127.0.0.1:8000\n"
    )
    monkeypatch.chdir(deep)
    assert find_config() == project / "memdiag.yaml"
    s = load_settings()
    assert s.budget == 321 and s.source == str(project / "memdiag.yaml")
    assert s.store.facts_file == str(project / "memory" / "facts.json")
    assert s.store.chroma == "http://127.0.0.1:8000"  # a server URL is not a path


def test_pyproject_tool_table(tmp_path, monkeypatch):
    project, deep = _tree(tmp_path)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "agent"\n\n[tool.memdiag]\nbudget = 640\nstrategy = "summary"\n\n'
        "[tool.memdiag.store]\ntop_k = 2\n"
    )
    monkeypatch.chdir(deep)
    s = load_settings()
    assert (s.budget, s.strategy, s.store.top_k) == (640, "summary", 2)
    assert s.source == str(project / "pyproject.toml")


def test_the_nearest_config_wins_and_memdiag_yaml_before_pyproject(tmp_path, monkeypatch):
    from memdiag.config import find_config

    project, deep = _tree(tmp_path)
    (project / "memdiag.yaml").write_text("budget: 1\n")
    (deep / "pyproject.toml").write_text("[tool.memdiag]\nbudget = 2\n")
    monkeypatch.chdir(deep)
    assert load_settings().budget == 2  # nearer, though a pyproject.toml
    (deep / "memdiag.yaml").write_text("budget: 3\n")
    assert load_settings().budget == 3  # same folder: memdiag.yaml first
    (deep / "memdiag.yaml").unlink()
    (deep / "pyproject.toml").write_text('[project]\nname = "x"  # no tool.memdiag table\n')
    assert find_config() == project / "memdiag.yaml"  # passed over, as ruff does


def test_no_config_anywhere_is_the_defaults(tmp_path, monkeypatch):
    from memdiag.config import find_config

    monkeypatch.chdir(tmp_path)
    if find_config() is None:  # nothing above the temporary folder either
        assert load_settings() == Settings()


def test_pyproject_errors_name_the_file_and_table(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text("[tool.memdiag]\nbudgt = 5\n")
    with pytest.raises(InputError, match=r"pyproject.toml \[tool.memdiag\]: unknown key 'budgt'"):
        load_settings(p)
    p.write_text("[tool.memdiag]\nbudget = 'lots'\n")
    with pytest.raises(InputError, match=r"\[tool.memdiag\]: budget must be an integer"):
        load_settings(p)
    p.write_text("[tool.memdiag\nbudget = 5\n")
    with pytest.raises(InputError, match=r"pyproject.toml: invalid TOML: .*line 1"):
        load_settings(p)
    p.write_text('[project]\nname = "x"\n')
    with pytest.raises(InputError, match=r"no \[tool.memdiag\] table"):
        load_settings(p)


def test_cli_reads_the_parent_config_and_check_finds_its_spec(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from memdiag.cli import app
    from tests.conftest import FIXTURES

    runner = CliRunner()
    project, deep = _tree(tmp_path)
    (project / "pyproject.toml").write_text("[tool.memdiag]\nbudget = 400\n")
    monkeypatch.chdir(deep)
    r = runner.invoke(app, ["replay", str(FIXTURES / "demo.jsonl"), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["budget"] == 400
    # `memdiag check` without a spec: none here or above is one line, exit 2
    r = runner.invoke(app, ["check"])
    assert r.exit_code == 2
    assert r.stderr.startswith("memdiag: no check spec given and no memdiag-checks.yaml in ")
    (project / "memdiag-checks.yaml").write_text(
        f"version: 1\ncases:\n  - name: allergy kept\n    transcript: {FIXTURES / 'demo.jsonl'}\n"
        "    expect:\n      - kept: allergic to peanuts\n        at_turn: 3\n"
    )
    r = runner.invoke(app, ["check", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert [c["name"] for c in json.loads(r.stdout)["cases"]] == ["allergy kept"]
