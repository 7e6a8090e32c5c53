"""Settings: YAML config → typed, validated dataclasses. Precedence: flags > file > defaults.

Every setting is documented in ``config.example.yaml``; a test keeps the two in step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdiag.errors import UsageError
from memdiag.tokens import ChatOverhead, TokenCounter, context_size, encoding_name_for
from memdiag.yamlio import load_yaml, to_dataclass

DEFAULT_CONFIG = "memdiag.yaml"


@dataclass(frozen=True)
class OverheadSettings:
    per_message: int = 3
    per_name: int = 1
    reply_priming: int = 3


@dataclass(frozen=True)
class SlidingWindowSettings:
    max_turns: int | None = None


@dataclass(frozen=True)
class SummarySettings:
    summarizer: str = "extractive"  # extractive | recorded | llm
    trigger_tokens: int | None = None  # default: 80% of the budget
    summary_max_tokens: int = 300
    keep_recent_tokens: int | None = None  # default: 40% of the budget


@dataclass(frozen=True)
class ScratchpadSettings:
    scratchpad_max_tokens: int = 200
    rules: str | None = None  # extra extraction rules (YAML), added to the built-in ones


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 2


@dataclass(frozen=True)
class StoreSettings:
    facts_file: str | None = None
    chroma: str | None = None
    collection: str | None = None
    top_k: int = 5
    max_distance: float | None = None  # a hit farther than this is not retrieved
    inject_max_tokens: int = 1000
    query: str | None = None  # retrieval query; default: the user message of the failure turn
    # one tenant of a multi-user store (mem0's user_id/agent_id/run_id metadata)
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    # the model that made the vectors of a collection that did not persist its embedding
    # function: "default" (MiniLM, offline) or a provider (openai, ...; reaches its API)
    embedding_function: str | None = None


@dataclass(frozen=True)
class AuditSettings:
    # measured on labelled pairs: benchmarks/bench_paraphrase.py, docs/stores.md
    near_duplicate_threshold: float = 0.80
    stale_after_days: float | None = None  # None: age alone never makes a record stale


@dataclass(frozen=True)
class Settings:
    model: str | None = None
    encoding: str | None = None
    budget: int | None = None
    reserve_output: int = 4096
    keep_system: bool = True
    strategy: str = "sliding_window"
    overhead: OverheadSettings = field(default_factory=OverheadSettings)
    sliding_window: SlidingWindowSettings = field(default_factory=SlidingWindowSettings)
    summary: SummarySettings = field(default_factory=SummarySettings)
    scratchpad: ScratchpadSettings = field(default_factory=ScratchpadSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    audit: AuditSettings = field(default_factory=AuditSettings)
    source: str | None = None  # the config file these came from, for messages

    @property
    def chat_overhead(self) -> ChatOverhead:
        o = self.overhead
        return ChatOverhead(o.per_message, o.per_name, o.reply_priming)

    def token_counter(self) -> TokenCounter:
        """The counter these settings describe: model/encoding and chat overhead."""
        return TokenCounter(encoding_name_for(self.model, self.encoding), self.chat_overhead)

    def effective_budget(self) -> int:
        """--budget, or the model's context size minus reserve_output."""
        if self.budget is not None:
            return self.budget
        return max(1, context_size(self.model) - self.reserve_output)

    def with_overrides(self, **flags: Any) -> Settings:
        """Apply CLI flags (None = not given). Dotted names reach sections: 'store.top_k'."""
        top: dict[str, Any] = {}
        sections: dict[str, dict[str, Any]] = {}
        for key, value in flags.items():
            if value is None:
                continue
            if "." in key:
                section, name = key.split(".", 1)
                sections.setdefault(section, {})[name] = value
            else:
                top[key] = value
        for section, values in sections.items():
            top[section] = dataclasses.replace(getattr(self, section), **values)
        return dataclasses.replace(self, **top)

    def validate(self) -> Settings:
        """Check the values the schema alone can judge; names of strategies and summarizers are
        checked by their registries (``memdiag.strategies.validate_settings``)."""
        if self.budget is not None and self.budget <= 0:
            raise UsageError(f"budget must be a positive number of tokens, got {self.budget}")
        if self.sliding_window.max_turns is not None and self.sliding_window.max_turns < 1:
            raise UsageError("max_turns must be at least 1")
        if self.store.top_k < 1:
            raise UsageError("top_k must be at least 1")
        return self


def load_settings(path: str | Path | None = None) -> Settings:
    """Settings from ``path``, or from ./memdiag.yaml when present, else the defaults."""
    if path is None:
        default = Path(DEFAULT_CONFIG)
        if not default.is_file():
            return Settings()
        path = default
    data = load_yaml(path)
    settings = to_dataclass(Settings, data, str(path))
    return dataclasses.replace(settings, source=str(path))
