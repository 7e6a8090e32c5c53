"""The OpenAI chat reader."""

from __future__ import annotations

import json

from memdiag.transcript import load
from tests.transcript.common import (
    write,
)


def test_openai_formats(tmp_path):
    conv = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ]
    }
    p = write(tmp_path, [conv, conv])
    t = load(p)
    assert t.format == "openai"
    assert len(t.sessions) == 2 and len(t.messages) == 8
    assert t.messages[2].tool_call_ids == ("c1",)
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps(conv["messages"]))
    t2 = load(arr)
    assert t2.format == "openai" and len(t2.messages) == 4 and t2.sessions == ("s1",)
