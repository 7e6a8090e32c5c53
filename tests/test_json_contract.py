"""The JSON output contract (docs/reference.md#json-output): every command's `--format json`
document carries `schema_version`, validates against its published JSON Schema
(memdiag/schemas/), is the same bytes when the same run is repeated, and never holds the home
folder.

Validation uses the `jsonschema` package, which chromadb (a dependency) already installs.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.diagnosis.verdicts import FailureLayer, Verdict
from memdiag.render.jsonout import SCHEMA_VERSION
from memdiag.stores.audit.report import KINDS, SEVERITIES
from memdiag.transcript.formats import formats
from tests.conftest import FIXTURES, ROOT

SCHEMAS = ROOT / "memdiag" / "schemas"
COMMANDS = ("replay", "diagnose", "inspect-store", "check")
runner = CliRunner()


def schema(command: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{command}.schema.json").read_text(encoding="utf-8"))


def validate(command: str, text: str) -> dict[str, Any]:
    doc = json.loads(text)
    jsonschema.Draft202012Validator(schema(command)).validate(doc)
    assert next(iter(doc)) == "schema_version"  # the first key, for a reader that peeks
    return doc


def run(*argv: str) -> str:
    res = runner.invoke(app, list(argv))
    assert res.exit_code in (0, 1), f"memdiag {' '.join(argv)}: {res.exit_code} {res.stderr}"
    return res.stdout


def twice(*argv: str) -> str:
    """The output of a run, checked to be the same bytes when run again, and free of the home
    folder (the tests' HOME, where memdiag's caches live)."""
    first = run(*argv)
    assert run(*argv) == first, f"memdiag {' '.join(argv)} differs between two runs"
    assert os.environ["HOME"] not in first, f"memdiag {' '.join(argv)} prints the home folder"
    return first


# --- the schemas themselves -----------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_valid_2020_12_schema_of_this_version(command: str) -> None:
    s = schema(command)
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert s["properties"]["schema_version"] == {"const": SCHEMA_VERSION}
    assert "schema_version" in s["required"]
    assert s["$id"].endswith(f":{command}:{SCHEMA_VERSION}")


def test_the_schemas_are_shipped_as_package_data() -> None:
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "schemas/*.schema.json" in pyproject["tool"]["setuptools"]["package-data"]["memdiag"]
    assert sorted(p.name for p in SCHEMAS.glob("*.schema.json")) == sorted(
        f"{c}.schema.json" for c in COMMANDS
    )


def test_the_schemas_name_every_verdict_layer_kind_and_severity_of_the_code() -> None:
    """A new verdict or finding kind must be published: the test names the schema to update."""
    diagnosis = schema("diagnose")["$defs"]["diagnosis"]["properties"]
    assert diagnosis["verdict"]["enum"] == [v.value for v in Verdict]
    assert diagnosis["layer"]["enum"] == [layer.value for layer in FailureLayer]
    finding = schema("inspect-store")["$defs"]["finding"]["properties"]
    assert finding["kind"]["enum"] == list(KINDS)
    assert finding["severity"]["enum"] == list(SEVERITIES)


def test_a_document_that_breaks_the_contract_is_refused() -> None:
    """The validation below can fail: a wrong type, a missing field, an unknown verdict."""
    good = json.loads(twice("diagnose", str(FIXTURES / "demo.jsonl"), "--format", "json"))
    validator = jsonschema.Draft202012Validator(schema("diagnose"))
    validator.validate(good)
    for broken in (
        {**good, "schema_version": "0"},
        {k: v for k, v in good.items() if k != "diagnoses"},
        {**good, "diagnoses": [{**good["diagnoses"][0], "verdict": "forgot"}]},
        {**good, "diagnoses": [{**good["diagnoses"][0], "at_turn": "3"}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(broken)


# --- every command on every fixture ---------------------------------------------------------


def _transcripts() -> Iterator[tuple[str, list[str]]]:
    """(fixture, extra flags): the canonical fixtures and every registered format's examples,
    with the choices a format needs to read them whole (`--conversation all`)."""
    for p in sorted(FIXTURES.glob("*.jsonl")):
        yield str(p.relative_to(FIXTURES)), []
    for f in formats().values():
        flags = [a for flag in getattr(f, "selects", {}).values() for a in (flag, "all")]
        for e in f.examples:
            yield e, flags


TRANSCRIPTS = list(_transcripts())


@pytest.mark.parametrize(("fixture", "flags"), TRANSCRIPTS, ids=[t for t, _ in TRANSCRIPTS])
def test_replay_and_diagnose_json_validate_and_repeat_byte_for_byte(
    fixture: str, flags: list[str]
) -> None:
    path = str(FIXTURES / fixture)
    replayed = twice(
        "replay", path, *flags, "--strategy", "all", "--budget", "400", "--format", "json"
    )
    doc = validate("replay", replayed)
    assert doc["transcript"] == path
    markers = runner.invoke(app, ["diagnose", path, *flags, "--budget", "400", "--format", "json"])
    if "no `forgot` markers" not in markers.stderr:  # a file without them is exit 2, no JSON
        validate("diagnose", twice("diagnose", path, *flags, "--budget", "400", "--format", "json"))
    fact = twice(
        "diagnose",
        path,
        *flags,
        "--fact",
        "allergic to peanuts",
        "--budget",
        "300",
        "--format",
        "json",
    )
    assert validate("diagnose", fact)["diagnoses"]


PROBES = [f.examples[0] for f in formats().values() if f.name in ("locomo", "longmemeval")]


@pytest.mark.parametrize("fixture", PROBES)
def test_diagnose_probes_json_validates(fixture: str) -> None:
    out = twice("diagnose", str(FIXTURES / fixture), "--probes", "--format", "json")
    assert all(d["details"].get("probe") for d in validate("diagnose", out)["diagnoses"])


FACTS = ["facts.json", "facts_records.json", "longterm_facts.json", "longterm_facts_zh.json"]


@pytest.mark.parametrize("facts", FACTS)
def test_inspect_store_json_of_facts_files_validates(facts: str) -> None:
    out = twice("inspect-store", "--facts-file", str(FIXTURES / facts), "--format", "json")
    assert validate("inspect-store", out)["stores"][0]["type"] == "facts_file"
    replayed = twice(
        "replay",
        str(FIXTURES / "longterm.jsonl"),
        "--facts-file",
        str(FIXTURES / facts),
        "--format",
        "json",
    )
    validate("replay", replayed)


def test_diagnose_with_a_facts_file_validates() -> None:
    out = twice(
        "diagnose",
        str(FIXTURES / "longterm.jsonl"),
        "--facts-file",
        str(FIXTURES / "longterm_facts.json"),
        "--budget",
        "4000",
        "--format",
        "json",
    )
    docs = validate("diagnose", out)["diagnoses"]
    assert any(d["layer"] == "long_term" for d in docs)


def test_check_json_validates_and_repeats() -> None:
    out = twice("check", str(FIXTURES / "checks.yaml"), "--format", "json")
    doc = validate("check", out)
    assert doc["passed"] + doc["failed"] == len(doc["cases"]) > 0


# --- Chroma stores: built here with the real model, read twice -------------------------------


def _build_store(path: Path, rows: list[dict[str, Any]], model: Path | None) -> None:
    import chromadb
    from chromadb.config import Settings
    from chromadb.utils.embedding_functions import DefaultEmbeddingFunction, ONNXMiniLM_L6_V2

    if model is not None:
        ONNXMiniLM_L6_V2.DOWNLOAD_PATH = model  # type: ignore[assignment]
    client = chromadb.PersistentClient(
        path=str(path), settings=Settings(anonymized_telemetry=False)
    )
    col = client.create_collection(
        "agent",
        embedding_function=DefaultEmbeddingFunction(),  # type: ignore[arg-type]
        configuration={"hnsw": {"space": "cosine"}},  # type: ignore[typeddict-item]
    )
    kwargs: dict[str, Any] = {}
    if model is None:  # vectors given: the store is readable without the model
        kwargs["embeddings"] = [
            [1.0 if i == k % 8 else 0.0 for i in range(8)] for k in range(len(rows))
        ]
    col.add(
        ids=[r["id"] for r in rows],
        documents=[r["document"] for r in rows],
        metadatas=[r["metadata"] for r in rows],
        **kwargs,
    )
    client.close()


def _rows(name: str) -> list[dict[str, Any]]:
    lines = (FIXTURES / "memories" / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(x) for x in lines if x.strip()]


@pytest.mark.chroma
def test_chroma_commands_validate_repeat_and_hold_no_home_path(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the model where a user has it (Chroma's cache under HOME), inspect-store and
    diagnose on a real store give valid documents, the same bytes twice, and no home path."""
    home = Path(os.environ["HOME"])
    cached = home / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2"
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(model_dir, cached)
    monkeypatch.delenv("MEMDIAG_ONNX_MODEL_DIR")
    store = tmp_path / "store"
    _build_store(store, _rows("agent.jsonl"), model_dir)
    outputs = [
        twice("inspect-store", "--chroma", str(store), "--format", "json"),
        twice(
            "diagnose",
            str(FIXTURES / "longterm.jsonl"),
            "--chroma",
            str(store),
            "--collection",
            "agent",
            "--budget",
            "4000",
            "--format",
            "json",
        ),
    ]
    audit = validate("inspect-store", outputs[0])
    assert audit["stores"][0]["retrieval_checks"] == "available"
    diagnoses = validate("diagnose", outputs[1])["diagnoses"]
    assert any(d["details"].get("retrieval") for d in diagnoses)  # the model ranked
    for out in outputs:
        assert str(home) not in out


@pytest.mark.chroma
def test_a_missing_model_is_named_without_the_home_path(tmp_path: Path, monkeypatch) -> None:
    """Without the model, the JSON names the model and how to get it, and no home path (where
    memdiag looked is narration on stderr, written `~/...`)."""
    monkeypatch.delenv("MEMDIAG_ONNX_MODEL_DIR", raising=False)
    home = tmp_path / "home-of-mia"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MEMDIAG_CACHE_DIR", str(home / ".cache" / "memdiag"))
    store = tmp_path / "store"
    _build_store(store, _rows("clean.jsonl"), None)
    out = twice("inspect-store", "--chroma", str(store), "--format", "json")
    (entry,) = validate("inspect-store", out)["stores"]
    assert entry["retrieval_checks"] == "skipped"
    assert "all-MiniLM-L6-v2" in entry["retrieval_reason"]
    told = runner.invoke(app, ["inspect-store", "--chroma", str(store), "--format", "json"])
    assert str(home) not in told.stderr
    diagnosed = twice(
        "diagnose",
        str(FIXTURES / "longterm.jsonl"),
        "--chroma",
        str(store),
        "--budget",
        "4000",
        "--format",
        "json",
    )
    validate("diagnose", diagnosed)
    for text in (out, diagnosed):
        assert str(home) not in text
