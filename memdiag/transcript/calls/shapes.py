"""The request and response bodies of the chat APIs, as call logs record them (docs/traces.md).

Request/response logs, OpenAI Batch files and LiteLLM's logging objects all hold the body the
client sent (``model``, ``messages``, Anthropic's ``system``) and the body the provider answered
(an OpenAI chat completion: ``choices[0].message``, ``usage.prompt_tokens``; an Anthropic
message: ``content`` blocks, ``usage.input_tokens``). These helpers read them into the inputs,
outputs and usage of a :class:`~memdiag.transcript.calls.Call`; errors are PathErrors naming the
path inside the record.
"""

from __future__ import annotations

from typing import Any

from memdiag.transcript.calls import Usage
from memdiag.transcript.model import RawMessage
from memdiag.transcript.source import message_from_dict
from memdiag.transcript.toolkit import PathError
from memdiag.transcript.tracing import int_or_none, sub


def messages_of(value: Any, where: str) -> list[RawMessage]:
    """A list of chat messages ``{role, content, tool_calls?, tool_call_id?}``."""
    if not isinstance(value, list):
        raise PathError(where, "expected a list of messages {role, content}")
    out = []
    for k, m in enumerate(value):
        if not isinstance(m, dict):
            raise PathError(f"{where}[{k}]", "expected a message object")
        try:
            out.append(message_from_dict(m, 0))
        except ValueError as exc:
            raise PathError(f"{where}[{k}]", str(exc)) from None
    return out


def request_inputs(body: Any, where: str) -> list[RawMessage]:
    """The messages a chat request sent: Anthropic's top-level ``system`` first, if any."""
    if not isinstance(body, dict):
        raise PathError(where, f"expected the request body (an object), got {type(body).__name__}")
    if "messages" not in body:
        raise PathError(f"{where}.messages", "missing: a chat request sends its messages")
    system = body.get("system")
    inputs: list[RawMessage] = []
    if isinstance(system, str) and system:
        inputs.append(RawMessage("system", system))
    elif isinstance(system, list):
        text = "\n".join(
            str(b.get("text", ""))
            for b in system
            if isinstance(b, dict) and b.get("type") == "text"
        )
        if text:
            inputs.append(RawMessage("system", text))
    return inputs + messages_of(body["messages"], f"{where}.messages")


def response_outputs(body: Any, where: str) -> tuple[list[RawMessage], Usage, str | None]:
    """The reply of a chat response (the first choice: the one the agent used), its usage and
    model. An OpenAI chat completion or an Anthropic message; None: no reply (a failed call)."""
    if body is None:
        return [], Usage(), None
    if not isinstance(body, dict):
        raise PathError(where, f"expected the response body (an object), got {type(body).__name__}")
    usage = sub(body, "usage", where)
    model = body.get("model")
    tokens = Usage(
        int_or_none(usage.get("prompt_tokens", usage.get("input_tokens"))),
        int_or_none(usage.get("completion_tokens", usage.get("output_tokens"))),
    )
    choices = body.get("choices")
    outputs: list[RawMessage] = []
    if isinstance(choices, list):
        if choices:
            first = choices[0]
            if not isinstance(first, dict) or not isinstance(first.get("message"), dict):
                raise PathError(f"{where}.choices[0].message", "missing: expected a message")
            message = {"role": "assistant", **first["message"]}
            outputs = messages_of([message], f"{where}.choices[0].message")
            if first.get("finish_reason") is not None:
                outputs[0].metadata["finish_reason"] = first["finish_reason"]
    elif isinstance(body.get("content"), list) and body.get("role") == "assistant":
        outputs = messages_of([{"role": "assistant", "content": body["content"]}], where)
    else:
        raise PathError(where, "not a chat response (expected choices, or Anthropic content)")
    return outputs, tokens, None if model is None else str(model)
