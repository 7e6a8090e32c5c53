"""Test isolation: no test touches the real HOME or user caches; Chroma telemetry is off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def onnx_model_dir() -> Path | None:
    """The offline MiniLM model: MEMDIAG_ONNX_MODEL_DIR, or ../shared beside the checkout."""
    env = os.environ.get("MEMDIAG_ONNX_MODEL_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2")
    for c in candidates:
        if (c / "onnx" / "model.onnx").is_file():
            return c
    return None


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    model = onnx_model_dir()
    if model is not None:
        monkeypatch.setenv("MEMDIAG_ONNX_MODEL_DIR", str(model))


@pytest.fixture
def model_dir() -> Path:
    """The embedding model, or a skip that says why (CI turns such skips into failures)."""
    d = onnx_model_dir()
    if d is None:
        if os.environ.get("MEMDIAG_REQUIRE_ALL"):
            pytest.fail("MEMDIAG_REQUIRE_ALL is set but no embedding model was found")
        pytest.skip(
            "no offline embedding model: set MEMDIAG_ONNX_MODEL_DIR to a folder holding "
            "onnx/model.onnx (all-MiniLM-L6-v2)"
        )
    return d
