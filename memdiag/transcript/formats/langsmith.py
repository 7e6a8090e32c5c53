"""LangSmith runs (docs/reference.md#observed-windows): the run dicts of ``Client.list_runs()`` /
the LangChain tracer.

A JSON array (or JSON Lines) of runs. ``llm`` runs carry the request: ``inputs.messages`` (the
tracer's ``[[dumpd(message), ...]]``, or OpenAI-style dicts from ``wrap_openai`` /
``@traceable``) and the reply in ``outputs.generations`` (or ``outputs.choices``); each becomes
a ``window`` event, with the provider's prompt tokens from ``usage_metadata`` /
``token_usage``. ``retriever`` runs become ``retrieval`` events (``inputs.query``,
``outputs.documents``). Threads: ``extra.metadata.thread_id`` (or ``session_id`` /
``conversation_id``), else the file is one conversation (each turn is usually its own
trace). Each run is mapped to a :class:`~memdiag.transcript.calls.Call`; an ``llm`` run under
a ``tool`` run belongs to an agent called as a tool (the interpreter keeps it apart, docs/
traces.md), and LangChain's ``lc_source: summarization`` marks a summarizer's call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.calls import SUMMARIZATION, Call, CallItem, Search, Usage
from memdiag.transcript.calls.interpret import interpret
from memdiag.transcript.formats.base import NO_SELECTION, Selection
from memdiag.transcript.formats.langchain import is_message as is_langchain_message
from memdiag.transcript.formats.langchain import read_message as read_langchain_message
from memdiag.transcript.model import RawItem, RawMessage
from memdiag.transcript.source import Source, message_from_dict
from memdiag.transcript.toolkit import PathError, documents, reject
from memdiag.transcript.tracing import (
    ancestors,
    as_text,
    first_record,
    int_or_none,
    records_of,
    sub,
    with_memory_tools,
)

name = "langsmith"
# a trace format: asked before the chat formats, which could take a run's messages for a chat
detect_priority = 11
# files of the repository's fixtures/ folder that this format reads (tests and fuzzing use them)
examples = (
    "formats/traces/langsmith_wrap_openai.json",
    "formats/traces/langsmith_runs.json",
)
# it reads LLM calls: --agent chooses among their agents (docs/traces.md)
selects = {"agent": "--agent"}

THREAD_KEYS = ("thread_id", "session_id", "conversation_id")


def _is_run(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("run_type"), str) and "inputs" in obj


def _runs(source: Source) -> list[tuple[str, dict[str, Any]]]:
    return documents(source, _is_run, "a LangSmith run (expected run_type and inputs)")


def message(m: Any, where: str) -> RawMessage:
    """One message of a run's inputs/outputs: LangChain serialized, or an OpenAI-style dict."""
    if is_langchain_message(m):
        found = read_langchain_message(where, m, 0)
        if found is None:
            raise PathError(where, "a RemoveMessage marker where a message was sent")
        return found
    if isinstance(m, dict) and "role" in m:
        try:
            return message_from_dict(m, 0)
        except ValueError as exc:
            raise PathError(where, str(exc)) from None
    raise PathError(where, "not a message (expected a LangChain message or {role, content})")


def _inputs(run: dict[str, Any], where: str) -> list[RawMessage]:
    inputs = sub(run, "inputs", where)
    msgs = inputs.get("messages")
    if msgs is None:
        if "prompts" in inputs:
            raise PathError(
                f"{where}.inputs.prompts",
                "a text-completion run (prompt strings, not messages): no window to read",
            )
        raise PathError(f"{where}.inputs", "llm run with no input messages")
    at = f"{where}.inputs.messages"
    if isinstance(msgs, list) and msgs and isinstance(msgs[0], list):
        msgs, at = msgs[0], f"{at}[0]"  # the tracer's batch of one prompt
    if not isinstance(msgs, list):
        raise PathError(at, "expected a list of messages")
    return [message(m, f"{at}[{k}]") for k, m in enumerate(msgs)]


def _outputs(run: dict[str, Any], where: str) -> list[RawMessage]:
    out = sub(run, "outputs", where)
    at = f"{where}.outputs"
    gens = out.get("generations")
    if isinstance(gens, list):
        first = gens[0] if gens and isinstance(gens[0], list) else gens
        msgs = []
        for k, g in enumerate(first[:1]):  # n > 1 samples: the first is the reply the agent used
            if isinstance(g, dict) and g.get("message") is not None:
                msgs.append(message(g["message"], f"{at}.generations[0][{k}].message"))
            elif isinstance(g, dict):
                msgs.append(RawMessage("assistant", as_text(g.get("text"))))
        return msgs
    choices = out.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return [message(choices[0].get("message"), f"{at}.choices[0].message")]
    if isinstance(out.get("output"), dict) and "role" in out["output"]:
        return [message(out["output"], f"{at}.output")]
    return []


def _prompt_tokens(run: dict[str, Any], where: str) -> int | None:
    extra = sub(run, "extra", where)
    meta = sub(extra, "metadata", f"{where}.extra")
    out = sub(run, "outputs", where)
    at = f"{where}.outputs"
    llm_output = sub(out, "llm_output", at)
    usage = sub(out, "usage", at)
    candidates = [
        sub(meta, "usage_metadata", f"{where}.extra.metadata").get("input_tokens"),
        sub(llm_output, "token_usage", f"{at}.llm_output").get("prompt_tokens"),
        sub(out, "usage_metadata", at).get("input_tokens"),
        usage.get("prompt_tokens"),
        usage.get("input_tokens"),
        run.get("prompt_tokens"),
    ]
    return next((n for n in map(int_or_none, candidates) if n is not None), None)


def _model(run: dict[str, Any], where: str) -> str | None:
    extra = sub(run, "extra", where)
    meta = sub(extra, "metadata", f"{where}.extra")
    params = sub(extra, "invocation_params", f"{where}.extra")
    model = meta.get("ls_model_name") or params.get("model") or params.get("model_name")
    return None if model is None else str(model)


def detect(source: Source) -> bool:
    return _is_run(first_record(source))


def read(
    source: Source, skip_invalid: bool, selection: Selection = NO_SELECTION
) -> Iterator[RawItem]:
    agent = selection.agent
    yield from with_memory_tools(_read(source, skip_invalid, agent))


def _read(source: Source, skip_invalid: bool, choice: str | None) -> Iterator[RawItem]:
    try:
        runs = _runs(source)
    except PathError as exc:
        raise source.error(str(exc)) from None
    by_id = {str(r.get("id")): r for _, r in runs if r.get("id") is not None}

    def tool_above(run: dict[str, Any]) -> str | None:
        chain = ancestors(run, by_id, lambda r: r.get("parent_run_id"))
        tools = (str(a.get("name") or "tool") for a in chain if a.get("run_type") == "tool")
        return next(tools, None)

    def meta(run: dict[str, Any]) -> dict[str, Any]:
        extra = run.get("extra")
        found = extra.get("metadata") if isinstance(extra, dict) else None
        return found if isinstance(found, dict) else {}

    def thread(run: dict[str, Any]) -> str | None:
        m = meta(run)
        for key in THREAD_KEYS:
            if m.get(key) is not None:
                return str(m[key])
        return None  # one conversation: a trace is one turn of it, not a session

    ordered = sorted(
        runs, key=lambda wr: str(wr[1].get("dotted_order") or wr[1].get("start_time") or "")
    )
    items: list[CallItem] = []
    for where, run in ordered:
        kind = run.get("run_type")
        if kind not in ("llm", "retriever"):
            continue
        agent = tool_above(run)
        sid = thread(run)
        try:
            if kind == "retriever":
                query = sub(run, "inputs", where).get("query", "")
                docs = sub(run, "outputs", where).get("documents")
                if docs is None:
                    continue  # a failed retrieval returned nothing to judge
                records = records_of(docs, f"{where}.outputs.documents")
                items.append(Search(where, as_text(query), records, sid, agent, agent is not None))
                continue
            inputs = _inputs(run, where)
            outputs = _outputs(run, where)
            tokens, model = _prompt_tokens(run, where), _model(run, where)
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        source_tag = meta(run).get("lc_source")
        items.append(
            Call(
                where,
                tuple(inputs),
                tuple(outputs),
                model,
                Usage(tokens),
                session=sid,
                agent=agent,
                parent=None if run.get("parent_run_id") is None else str(run["parent_run_id"]),
                id=None if run.get("id") is None else str(run["id"]),
                start=run.get("start_time"),
                markers=frozenset({SUMMARIZATION}) if source_tag == SUMMARIZATION else frozenset(),
                nested=agent is not None,
            )
        )
    yield from interpret(items, source, agent=choice, unit="run")
