"""Settings: YAML config → typed, validated dataclasses. Precedence: flags > file > defaults.

The file is ``--config FILE``, else the nearest ``memdiag.yaml`` or ``pyproject.toml`` with a
``[tool.memdiag]`` table in the current directory or its parents (docs/config.md).

Every setting is documented in ``config.example.yaml``; a test keeps the two in step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdiag.errors import InputError, UsageError
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
    # a memory-store file: MCP memory graph, LangGraph items/SqliteStore, Agno, CrewAI LTM
    memory_store: str | None = None
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


PYPROJECT = "pyproject.toml"
TOOL_TABLE = "[tool.memdiag]"
MAX_CONFIG_BYTES = 1 << 20  # a config or pyproject.toml is a few kilobytes


def find_config(start: str | Path | None = None) -> Path | None:
    """The config that applies in ``start`` (default: the current directory): the nearest
    directory, going up to the filesystem root, that holds ``memdiag.yaml`` or a
    ``pyproject.toml`` with a ``[tool.memdiag]`` table (memdiag.yaml first), as ruff and pytest
    look for theirs. A pyproject.toml without the table is passed over."""
    here = Path(start if start is not None else Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if _is_file(folder / DEFAULT_CONFIG):
            return folder / DEFAULT_CONFIG
        pyproject = folder / PYPROJECT
        if _is_file(pyproject) and _has_tool_table(pyproject):
            return pyproject
    return None


def find_upward(name: str, start: str | Path | None = None) -> Path | None:
    """``name`` in ``start`` (default: the current directory) or the nearest parent holding it."""
    here = Path(start if start is not None else Path.cwd()).absolute()
    return next((d / name for d in (here, *here.parents) if _is_file(d / name)), None)


def _is_file(path: Path) -> bool:
    from memdiag.fileio import is_file

    try:
        return is_file(path)
    except InputError:  # a folder we may not look into, on the way up: nothing found there
        return False


def _has_tool_table(path: Path) -> bool:
    # a cheap look first: a project's pyproject.toml that never mentions memdiag is not parsed
    from memdiag.fileio import read_text

    try:
        if "tool.memdiag" not in read_text(path, MAX_CONFIG_BYTES, "pyproject.toml"):
            return False
    except InputError:  # not ours to judge on the way up (too large, not UTF-8)
        return False
    return _tool_table(path, required=False) is not None  # invalid TOML here is an error


def load_pyproject(path: str | Path) -> Any:
    """The ``[tool.memdiag]`` table of a pyproject.toml (tomllib, or tomli before Python 3.11)."""
    return _tool_table(path, required=True)


def _tool_table(path: str | Path, required: bool) -> Any:
    import sys

    from memdiag.fileio import read_text

    name = str(path)
    text = read_text(path, MAX_CONFIG_BYTES, "pyproject.toml")
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 (tomli is a dependency there, see pyproject.toml)
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"invalid TOML: {exc}", path=name) from None
    table = data.get("tool", {}).get("memdiag") if isinstance(data.get("tool"), dict) else None
    if table is None:
        if not required:
            return None
        raise InputError(f"no {TOOL_TABLE} table", path=name)
    if not isinstance(table, dict):
        raise InputError(f"{TOOL_TABLE} must be a table", path=name)
    return table


def load_settings(path: str | Path | None = None, start: str | Path | None = None) -> Settings:
    """Settings from ``path`` (a YAML file, or a pyproject.toml's ``[tool.memdiag]``), or from
    the config :func:`find_config` finds from ``start``, else the defaults.

    Paths in a config file (``store.facts_file``, ``store.chroma``, ``scratchpad.rules``) are
    relative to the file that holds them, so a config found in a parent directory means the
    same files from every subdirectory (docs/config.md).
    """
    if path is None:
        path = find_config(start)
        if path is None:
            return Settings()
    path = Path(path)
    if path.name == PYPROJECT or path.suffix == ".toml":
        data, label = load_pyproject(path), f"{path} {TOOL_TABLE}"
    else:
        data, label = load_yaml(path), str(path)
    settings = to_dataclass(Settings, data, label)
    return dataclasses.replace(_relative_to(settings, path.parent), source=str(path))


def _relative_to(settings: Settings, folder: Path) -> Settings:
    def at(value: str | None) -> str | None:
        if value is None or "://" in value:  # a Chroma server URL stays as written
            return value
        p = Path(value).expanduser()
        return value if p.is_absolute() else str(folder / p)

    store, pad = settings.store, settings.scratchpad
    return dataclasses.replace(
        settings,
        store=dataclasses.replace(store, facts_file=at(store.facts_file), chroma=at(store.chroma)),
        scratchpad=dataclasses.replace(pad, rules=at(pad.rules)),
    )
