"""A LangChain agent whose retriever missed the fact, under OpenInference (docs/traces.md):
the RETRIEVER span's documents keep their ids, scores and the query, and the verdict is
judged from the trace alone.

fixtures/stacks/not_retrieved/make.py ran the real libraries: the retriever's documents carry
their id and score in `metadata`, which OpenInference writes as a JSON string.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from memdiag.cli import app
from memdiag.transcript import load
from tests.conftest import FIXTURES

TRACE = FIXTURES / "stacks" / "not_retrieved" / "trace.json"
runner = CliRunner()


def test_retriever_documents_keep_ids_scores_and_query() -> None:
    t = load(TRACE)
    (r,) = t.retrievals
    assert r.query == "Suggest a snack for my flight."
    assert [(x.id, x.content, x.score) for x in r.records] == [
        ("mem-3", "Prefers window seats", 0.41),
        ("mem-7", "Flies to Lisbon often", 0.33),
    ]
    # the search served the reply of turn 3, whose request injected what it returned
    assert t.messages[r.before].turn == 3
    (memories,) = t.windows[-1].extra
    assert memories.section == "memories" and "Prefers window seats" in memories.content


def test_the_verdict_is_not_retrieved_from_the_trace() -> None:
    res = runner.invoke(
        app,
        ["diagnose", str(TRACE), "--fact", "allergic to peanuts", "--at", "3", "--format", "json"],
    )
    assert res.exit_code == 0, res.output
    (d,) = json.loads(res.stdout)["diagnoses"]
    assert d["verdict"] == "long_term_not_retrieved"
    assert d["flags"] == ["judged_from_trace"]
    assert d["evidence"][0]["text"] == "Hi, I'm Mia. I'm allergic to peanuts."
    (search,) = d["details"]["recorded_retrieval"]
    assert search["records"] == [{"id": "mem-3", "score": 0.41}, {"id": "mem-7", "score": 0.33}]
