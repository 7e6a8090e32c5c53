"""The ``llm`` summarizer: any OpenAI-compatible chat endpoint (POST {base_url}/chat/completions),
through urllib, for the `summary` strategy (docs/reference.md#strategies). Optional: never
needed by tests, imported only when a config asks for it."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from memdiag.errors import UnavailableError, UsageError
from memdiag.tokens import truncate_to_tokens

if TYPE_CHECKING:
    from memdiag.config import LLMSettings
    from memdiag.strategies.base import Item
    from memdiag.tokens import TokenCounter

LLM_SYSTEM = (
    "You maintain the running summary of a conversation between a user and an assistant. "
    "Keep every fact the assistant will need later: names, numbers, dates, places, "
    "preferences, and above all constraints (allergies, medical facts, prohibitions, "
    "time zone, units) stated exactly. Write plain sentences, no preamble."
)


class LLMSummarizer:
    """Any OpenAI-compatible chat endpoint (POST {base_url}/chat/completions) via urllib."""

    name = "llm"
    compresses = True

    def __init__(self, counter: TokenCounter, llm: LLMSettings) -> None:
        if not llm.base_url or not llm.model:
            raise UsageError(
                "the llm summarizer needs llm.base_url and llm.model in the config file"
            )
        self.counter = counter
        self.settings = llm
        self.url = llm.base_url.rstrip("/") + "/chat/completions"

    def summarize(self, previous: str, messages: Sequence[Item], max_tokens: int) -> str:
        room = max_tokens - self.counter.section_cost("x") + self.counter.count("x")
        if room <= 0:
            return ""
        transcript = "\n".join(f"{item[0]}: {item[1]}" for item in messages)
        prompt = (
            f"Previous summary:\n{previous or '(none)'}\n\nNew messages:\n{transcript}\n\n"
            f"Write the updated summary in at most {room} tokens."
        )
        body = {
            "model": self.settings.model,
            "messages": [
                {"role": "system", "content": LLM_SYSTEM},
                {"role": "user", "content": prompt},
            ],
            "temperature": 0,
            "max_tokens": room,
        }
        reply = self._post(body)
        return truncate_to_tokens(self.counter, reply.strip(), max_tokens)

    def shrink(self, summary: str, max_tokens: int) -> str:
        # no second request: cutting is deterministic and free
        return truncate_to_tokens(self.counter, summary, max_tokens)

    def _post(self, body: Mapping[str, object]) -> str:
        import urllib.error  # only the llm summarizer talks HTTP: start-up stays light
        import urllib.request

        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.settings.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode("utf-8")
        attempts = max(0, self.settings.max_retries) + 1
        last = ""
        for attempt in range(attempts):
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.settings.timeout) as response:
                    payload = json.loads(response.read().decode("utf-8"))
                return str(payload["choices"][0]["message"]["content"] or "")
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code} {exc.reason}"
                if exc.code < 500 and exc.code != 429:
                    break  # a client error does not go away by retrying
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                last = str(getattr(exc, "reason", exc))
            except (ValueError, KeyError, IndexError, TypeError):
                raise UnavailableError(
                    f"llm summarizer: {self.url} did not answer with a chat completion"
                ) from None
            if attempt + 1 < attempts:
                time.sleep(min(2.0, 0.25 * 2**attempt))
        raise UnavailableError(f"llm summarizer: cannot reach {self.url}: {last}")
