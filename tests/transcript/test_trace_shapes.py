"""Trace formats given values of the wrong type: each error names the path inside the file.

The four trace readers (otel, langsmith, langfuse, letta) check the shapes they rely on, so a
string where an object belongs gives the precise one-line error (``file: [1].inputs: expected
an object, got list``); the loader has no catch-all, so a value a reader did not check is a
reader bug (exit 3). The cases are representative of what the long fuzz run (tests/fuzz,
MEMDIAG_FUZZ=long) found; the property test at the end runs the fuzz mutations of every
registered format's seed through ``load``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.errors import InputError
from memdiag.transcript import load
from memdiag.transcript.formats import formats, get
from memdiag.transcript.formats.base import Selection
from tests.conftest import FIXTURES
from tests.fuzz.mutate import json_file

TRACES = FIXTURES / "formats" / "traces"
runner = CliRunner()


def _jsonl(name: str) -> list[Any]:
    lines = (TRACES / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _json(name: str) -> Any:
    return json.loads((TRACES / name).read_text(encoding="utf-8"))


def _first_span(doc: list[Any]) -> dict[str, Any]:
    span: dict[str, Any] = doc[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    return span


def _attr(span: dict[str, Any], value: Any) -> None:
    span["attributes"][0]["value"] = value


def _llm_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in runs if r["run_type"] == "llm")


def _generation(doc: dict[str, Any]) -> dict[str, Any]:
    return next(o for o in doc["data"] if o["type"] == "GENERATION")


def _tool_call_message(doc: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in doc["agents"][0]["messages"] if m.get("tool_calls"))


SPANS = "line 1.resourceSpans[0].scopeSpans[0].spans"
# (seed, how to damage it, the error after "FILE: ")
CASES: dict[str, tuple[str, Callable[[Any], object], str]] = {
    "otel-span-not-object": (
        "otel_openai_v2.jsonl",
        lambda d: d[0]["resourceSpans"][0]["scopeSpans"][0]["spans"].__setitem__(0, "x"),
        f"{SPANS}[0]: expected a span object, got str",
    ),
    "otel-scopespans-not-list": (
        "otel_openai_v2.jsonl",
        lambda d: d[0]["resourceSpans"][0].__setitem__("scopeSpans", 7),
        "line 1.resourceSpans[0].scopeSpans: expected a list, got int",
    ),
    "otel-span-id-object": (
        "otel_openai_v2.jsonl",
        lambda d: _first_span(d).__setitem__("spanId", {"a": 1}),
        f"{SPANS}[0].spanId: expected an id string, got dict",
    ),
    "otel-int-value-list": (
        "otel_openai_v2.jsonl",
        lambda d: _attr(_first_span(d), {"intValue": [1]}),
        f"{SPANS}[0].attributes[0].value.intValue: expected an integer, got list",
    ),
    "otel-kvlist-not-object": (
        "otel_openai_v2.jsonl",
        lambda d: _attr(_first_span(d), {"kvlistValue": ["a"]}),
        f"{SPANS}[0].attributes[0].value.kvlistValue: expected an object, got list",
    ),
    "otel-sdk-attributes-list": (
        "otel_spans.json",
        lambda d: d[1].__setitem__("attributes", ["gen_ai.operation.name"]),
        "[1].attributes: expected an object, got list",
    ),
    "langsmith-inputs-list": (
        "langsmith_wrap_openai.json",
        lambda d: _llm_run(d).__setitem__("inputs", [{"messages": []}]),
        "[1].inputs: expected an object, got list",
    ),
    "langsmith-outputs-string": (
        "langsmith_wrap_openai.json",
        lambda d: _llm_run(d).__setitem__("outputs", "Try pretzels."),
        "[1].outputs: expected an object, got str",
    ),
    "langsmith-usage-metadata-list": (
        "langsmith_wrap_openai.json",
        lambda d: _llm_run(d)["extra"]["metadata"].__setitem__("usage_metadata", [3]),
        "[1].extra.metadata.usage_metadata: expected an object, got list",
    ),
    "langfuse-usage-string": (
        "langfuse_observations.json",
        lambda d: _generation(d).__setitem__("usage", "12 tokens"),
        "data[{k}].usage: expected an object, got str",
    ),
    "langfuse-choice-not-object": (
        "langfuse_observations.json",
        lambda d: _generation(d).__setitem__("output", {"choices": ["Try pretzels."]}),
        "data[{k}].output.choices[0]: expected an object, got str",
    ),
    "letta-group-not-object": (
        "letta_agent.af",
        lambda d: d.__setitem__("groups", ["manager"]),
        "groups[0]: expected an object, got str",
    ),
    "letta-llm-config-string": (
        "letta_agent.af",
        lambda d: d["agents"][0].__setitem__("llm_config", "gpt-4o-mini"),
        "agents[0].llm_config: expected an object, got str",
    ),
    "letta-tool-name-object": (
        "letta_agent.af",
        lambda d: _tool_call_message(d)["tool_calls"][0]["function"].__setitem__("name", {}),
        "agents[0].messages[{k}]: field 'tool_calls[0].function.name' must be a string, got dict",
    ),
}


def _damaged(seed: str, damage: Callable[[Any], object], folder: Path) -> tuple[Path, Any]:
    jsonl = seed.endswith(".jsonl")
    doc = _jsonl(seed) if jsonl else _json(seed)
    damage(doc)
    path = folder / (Path(seed).stem + (".jsonl" if jsonl else ".json"))
    if jsonl:
        path.write_text("\n".join(json.dumps(d) for d in doc) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path, doc


def _index(doc: Any, case: str) -> int:
    """The element the case damaged, for expectations that name it."""
    if case.startswith("langfuse"):
        return next(k for k, o in enumerate(doc["data"]) if o["type"] == "GENERATION")
    if case.startswith("letta"):
        msgs = doc["agents"][0]["messages"]
        return next(k for k, m in enumerate(msgs) if m.get("tool_calls"))
    return 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_wrong_type_names_the_path_inside_the_file(case: str, tmp_path: Path) -> None:
    seed, damage, expected = CASES[case]
    path, doc = _damaged(seed, damage, tmp_path)
    expected = expected.format(k=_index(doc, case))
    fmt = case.split("-")[0]
    for named in (None, fmt):  # detected, and named with --from
        with pytest.raises(InputError) as exc:
            load(path, named)
        assert str(exc.value) == f"{path}: {expected}"
    res = runner.invoke(app, ["replay", str(path), "--format", "json"])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == f"memdiag: {path}: {expected}"
    assert "Traceback" not in res.output


def test_wrong_type_with_skip_invalid_skips_the_call(tmp_path: Path) -> None:
    """A bad usage object spoils one call, not the file: --skip-invalid skips and counts it."""
    seed, damage, _ = CASES["langsmith-usage-metadata-list"]
    path, _ = _damaged(seed, damage, tmp_path)
    whole = load(TRACES / seed)
    t = load(path, skip_invalid=True)
    assert t.skipped == 1
    assert len(t.windows) == len(whole.windows) - 1


# every format read from parsed JSON, with its first example as the seed (the registry's list)
SEEDS = {f.name: f.examples[0] for f in formats().values() if not hasattr(f, "detect_path")}


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_fuzzed_inputs_are_input_errors_or_read(fmt: str) -> None:
    """The fuzz harness's mutations of each format's seed: a reader either reads the file or
    refuses it with an InputError; any other exception is a reader bug (exit 3) and fails here."""
    seed = SEEDS[fmt]
    jsonl = seed.endswith(".jsonl")
    folder = Path(tempfile.mkdtemp(prefix="memdiag-shapes-"))

    @settings(
        max_examples=40,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        data=json_file((FIXTURES / seed).read_text(encoding="utf-8"), jsonl),
        named=st.booleans(),
        skip=st.booleans(),
    )
    def run(data: bytes, named: bool, skip: bool) -> None:
        path = folder / ("in.jsonl" if jsonl else "in.json")
        path.write_bytes(data)
        chosen = Selection(**{c: "all" for c in getattr(get(fmt), "selects", {})})
        with contextlib.suppress(InputError):
            load(path, fmt if named else None, skip_invalid=skip, selection=chosen)

    try:
        run()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
