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
