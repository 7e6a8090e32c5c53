"""`replay --format json` is streamed turn by turn: byte for byte the document `dumps` gives."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdiag.config import Settings
from memdiag.render.jsonout import dumps, replay_json, replay_json_chunks
from memdiag.replay import run
from memdiag.transcript import load
from tests.conftest import FIXTURES
from tests.helpers import transcripts


def _same(transcript, budget: int) -> None:  # type: ignore[no-untyped-def]
    report = run(transcript, Settings(budget=budget).with_overrides(strategy="all"))
    for results in (report.results, report.results[:1], []):
        whole = dumps(replay_json(transcript.path, report.encoding, report.budget, results))
        streamed = "".join(
            replay_json_chunks(transcript.path, report.encoding, report.budget, results)
        )
        assert streamed == whole


def test_fixtures_stream_the_same_document() -> None:
    files = sorted(FIXTURES.glob("*.jsonl"))
    assert files
    for path in files:
        for budget in (200, 400, 4000):  # evictions, summaries, pins, overflow
            _same(load(path), budget)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(40, 600))
def test_generated_transcripts_stream_the_same_document(transcript, budget) -> None:  # type: ignore[no-untyped-def]
    _same(transcript, budget)


def test_recorded_windows_stream_the_same_document() -> None:
    """With recorded windows the `observed` strategy adds its calls: still dumps' exact text."""
    import json

    from typer.testing import CliRunner

    from memdiag.cli import app

    traces = sorted((FIXTURES / "formats" / "traces").glob("*.json*"))
    assert traces
    seen_calls = False
    for path in traces:
        res = CliRunner().invoke(
            app, ["replay", str(path), "--strategy", "all", "--format", "json", "--budget", "200"]
        )
        if res.exit_code != 0:
            continue  # not a transcript on its own (e.g. a sidecar file)
        doc = json.loads(res.stdout)
        assert res.stdout == json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
        seen_calls |= "calls" in doc["strategies"].get("observed", {})
    assert seen_calls
