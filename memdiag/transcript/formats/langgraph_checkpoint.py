"""One LangGraph checkpoint as `langchain_core.load.dumpd(checkpoint)` writes it
(docs/framework-state.md): `{v, id, ts, channel_values: {messages: [LangChain constructor
dicts]}, channel_versions, versions_seen}`.

A checkpoint is the graph's state at one step: its messages are the transcript, as the
`langchain` reader reads them. What the graph removed before that step is not in it, and no
window is known; a note says so (a checkpoint database, the `langgraph` format, has every step).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memdiag.transcript.formats.langchain import is_message, read_message
from memdiag.transcript.model import RawItem
from memdiag.transcript.source import Source
from memdiag.transcript.toolkit import PathError, reject

name = "langgraph_checkpoint"
# recognised by its own keys (`v`, `channel_values`); asked before langchain, which reads
# LangGraph's other states ({"messages"}, {"values": {"messages"}}) but not this one
detect_priority = 39
examples = ("formats/langgraph_sqlite/checkpoint_dumpd.json",)

NOTE = (
    "one LangGraph checkpoint: the state at one step ({ts}); messages the graph removed "
    "before it are not in it, and no window is known (a checkpoint database has them)"
)


def _is_checkpoint(doc: Any) -> bool:
    values = doc.get("channel_values") if isinstance(doc, dict) else None
    return (
        isinstance(values, dict)
        and "v" in doc
        and isinstance(values.get("messages"), list)
        and (not values["messages"] or is_message(values["messages"][0]))
    )


def detect(source: Source) -> bool:
    return len(source.records) == 1 and _is_checkpoint(source.records[0][1])


def read(source: Source, skip_invalid: bool) -> Iterator[RawItem]:
    doc = source.records[0][1] if len(source.records) == 1 else None
    if not isinstance(doc, dict) or not _is_checkpoint(doc):
        raise source.error(
            "not a LangGraph checkpoint (expected {v, channel_values: {messages: [...]}})"
        )
    from memdiag.transcript.checkpoints import state_messages  # the checkpoint reader, to read

    ts = doc.get("ts")
    source.notes.append(NOTE.format(ts=ts if isinstance(ts, str) else "time unknown"))
    try:
        messages = state_messages("", doc) or ()
    except PathError as exc:
        raise source.error(str(exc)) from None
    for where, msg in messages:
        try:
            raw = read_message(where.lstrip("."), msg, 1)
        except PathError as exc:
            reject(source, skip_invalid, exc)
            continue
        if raw is not None:
            yield raw
