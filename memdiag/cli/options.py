"""The command-line options, declared once, and the option groups commands share.

:class:`WindowFlags` (replay, diagnose) and :class:`StoreFlags` (diagnose, inspect-store) are
dataclasses of Annotated options; a command takes one parameter of the group's type and
:func:`option_groups` expands it into the options.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from memdiag.render import OutputFormat
from memdiag.transcript.formats import names as format_names

if TYPE_CHECKING:
    from memdiag.config import Settings

# --- shared options, declared once ---------------------------------------------------------

TranscriptArg = Annotated[
    Path,
    typer.Argument(help="Transcript file: canonical JSONL or a supported format; - reads stdin."),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Config: a YAML file or a pyproject.toml with [tool.memdiag] (default: the "
        "nearest memdiag.yaml or pyproject.toml [tool.memdiag] here or in a parent folder).",
    ),
]
FormatOpt = Annotated[
    OutputFormat, typer.Option("--format", "-f", help="Output format.", case_sensitive=False)
]
ModelOpt = Annotated[
    str | None,
    typer.Option(help="Model name: picks the tiktoken encoding and the default context size."),
]
EncodingOpt = Annotated[
    str | None, typer.Option(help="tiktoken encoding (overrides --model): o200k_base, cl100k_base.")
]
BudgetOpt = Annotated[
    int | None,
    typer.Option(
        help="Most tokens the window may hold, all sections together "
        "(default: context size minus reserve_output)."
    ),
]
StrategyOpt = Annotated[
    str | None,
    typer.Option(
        "--strategy",
        "-s",
        help="sliding_window, summary, scratchpad, observed (the windows a trace recorded), "
        "or all (replay only: side by side; observed included when the trace recorded "
        "windows).",
    ),
]
MaxTurnsOpt = Annotated[
    int | None, typer.Option(help="Sliding window: keep at most this many recent turns.")
]
FactOpt = Annotated[
    list[str] | None,
    typer.Option("--fact", help="A fact the agent should remember (repeatable)."),
]
FromOpt = Annotated[
    str | None,
    typer.Option(
        "--from",
        help=f"Input format (default: auto-detect): {', '.join(format_names())}.",
    ),
]
MemoryFileOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--memory-file",
        help="An instruction file the agent reads at every session start (CLAUDE.md, AGENTS.md, "
        "MEMORY.md; repeatable): its tokens count in the window, and a fact it states is "
        "delivered by that layer.",
    ),
]
SkipInvalidOpt = Annotated[
    bool, typer.Option("--skip-invalid", help="Skip malformed lines and report how many.")
]
SessionOpt = Annotated[
    str | None,
    typer.Option(
        "--session",
        help="A file or folder of several sessions or threads (an Agents SDK or LangGraph "
        "database, a LlamaIndex chat store, ADK sessions, a coding agent's session folder): the "
        "one to read (ID, or all); without it, they are listed.",
    ),
]
AgentOpt = Annotated[
    str | None,
    typer.Option(
        "--agent",
        help="A file of several agents (a Claude Code session, a trace or call log): the agent "
        "to read (a name or id, as the warning lists them, or all); without it, the one the "
        "human talks to.",
    ),
]
ConversationOpt = Annotated[
    str | None,
    typer.Option(
        "--conversation",
        help="ChatGPT/Claude.ai export: the conversation to read (ID or title, or all); "
        "without it, the conversations are listed.",
    ),
]
SystemOpt = Annotated[
    str | None,
    typer.Option(
        "--system",
        help="The system prompt the agent sends, for files that do not save it (AutoGen, "
        "LlamaIndex, Google ADK state): TEXT, or @FILE to read it from a file.",
    ),
]
SummarizerOpt = Annotated[
    str | None, typer.Option(help="Summary strategy: extractive (default), recorded or llm.")
]
HtmlOpt = Annotated[
    Path | None,
    typer.Option(
        "--html",
        help="Also write an interactive HTML report here: one self-contained file (no network) "
        "with a turn scrubber and each strategy's window at any turn.",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="No warnings, progress or notes on stderr; errors still print."
    ),
]
SummaryMaxOpt = Annotated[
    int | None, typer.Option(help="Summary: the running summary never exceeds this many tokens.")
]
TriggerOpt = Annotated[
    int | None, typer.Option(help="Summary: compress when the window passes this many tokens.")
]
KeepRecentOpt = Annotated[
    int | None, typer.Option(help="Summary: tokens kept verbatim after a compression.")
]
PinnedMaxOpt = Annotated[
    int | None, typer.Option(help="Scratchpad: pinned fields never exceed this many tokens.")
]
RulesOpt = Annotated[
    Path | None, typer.Option("--rules", help="Scratchpad: extra extraction rules (YAML).")
]

AtOpt = Annotated[
    int | None, typer.Option("--at", help="Turn at which the agent failed (default: last turn).")
]
FactsFileOpt = Annotated[
    Path | None, typer.Option("--facts-file", help="JSON facts file (profile layer, exact keys).")
]
ChromaOpt = Annotated[
    str | None,
    typer.Option("--chroma", help="Chroma store: a persistent directory or http://host:port."),
]
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Memory-store file, layout detected: the MCP memory server's graph (JSONL or "
        "read_graph JSON), LangGraph store items JSON or SqliteStore, Agno memories JSON, "
        "CrewAI long_term_memory_storage.db; or a Qdrant local folder (memdiag[qdrant]), a "
        "LanceDB folder, CrewAI ≥ 1.10's memory (memdiag[lancedb]). diagnose retrieves from "
        "it as its library does. E.g. --store memory.jsonl.",
    ),
]
CollectionOpt = Annotated[
    str | None, typer.Option("--collection", help="Chroma collection (default: all).")
]
TopKOpt = Annotated[int | None, typer.Option("--top-k", help="Memories retrieved per query.")]
UserIdOpt = Annotated[
    str | None,
    typer.Option("--user-id", help="Read one user of a multi-user store (mem0's user_id)."),
]
AgentIdOpt = Annotated[
    str | None, typer.Option("--agent-id", help="Read one agent's memories (mem0's agent_id).")
]
RunIdOpt = Annotated[
    str | None, typer.Option("--run-id", help="Read one run's memories (mem0's run_id).")
]
EmbeddingFunctionOpt = Annotated[
    str | None,
    typer.Option(
        "--embedding-function",
        help="Model that made the vectors of a collection that persisted none (langchain, "
        "mem0): 'default' (MiniLM, offline) or a provider such as openai or "
        "openai:text-embedding-3-small (uses its API). Checked against the stored dimension.",
    ),
]


@dataclass(frozen=True)
class WindowFlags:
    """The window flags replay and diagnose share: strategy, budget, model and strategy options.

    A command declares one parameter of this type; :func:`option_groups` turns it into these
    options (in this order) and hands the command the parsed group.
    """

    strategy: StrategyOpt = None
    budget: BudgetOpt = None
    max_turns: MaxTurnsOpt = None
    model: ModelOpt = None
    encoding: EncodingOpt = None
    summarizer: SummarizerOpt = None
    summary_max_tokens: SummaryMaxOpt = None
    trigger_tokens: TriggerOpt = None
    keep_recent_tokens: KeepRecentOpt = None
    scratchpad_max_tokens: PinnedMaxOpt = None
    rules: RulesOpt = None

    def overrides(self) -> dict[str, Any]:
        """As dotted settings overrides (None: keep the config file's value)."""
        return {
            "strategy": self.strategy,
            "budget": self.budget,
            "model": self.model,
            "encoding": self.encoding,
            "sliding_window.max_turns": self.max_turns,
            "summary.summarizer": self.summarizer,
            "summary.summary_max_tokens": self.summary_max_tokens,
            "summary.trigger_tokens": self.trigger_tokens,
            "summary.keep_recent_tokens": self.keep_recent_tokens,
            "scratchpad.scratchpad_max_tokens": self.scratchpad_max_tokens,
            "scratchpad.rules": str(self.rules) if self.rules else None,
        }


@dataclass(frozen=True)
class StoreFlags:
    """The long-term store flags diagnose and inspect-store share."""

    facts_file: FactsFileOpt = None
    chroma: ChromaOpt = None
    store: StoreOpt = None
    collection: CollectionOpt = None
    user_id: UserIdOpt = None
    agent_id: AgentIdOpt = None
    run_id: RunIdOpt = None
    embedding_function: EmbeddingFunctionOpt = None

    def overrides(self) -> dict[str, Any]:
        return {
            "store.facts_file": str(self.facts_file) if self.facts_file else None,
            "store.chroma": self.chroma,
            "store.memory_store": self.store,
            "store.collection": self.collection,
            "store.user_id": self.user_id,
            "store.agent_id": self.agent_id,
            "store.run_id": self.run_id,
            "store.embedding_function": self.embedding_function,
        }


@dataclass(frozen=True)
class InputFlags:
    """How a transcript is read, shared by replay, diagnose and convert."""

    input_format: FromOpt = None
    skip_invalid: SkipInvalidOpt = False
    session: SessionOpt = None
    conversation: ConversationOpt = None
    system: SystemOpt = None
    agent: AgentOpt = None


F = TypeVar("F", bound=Callable[..., Any])


def option_groups(fn: F) -> F:
    """Expand each parameter typed as an option group (a dataclass of Annotated options) into
    its options, in place; the command receives the group built from them."""
    sig = inspect.signature(fn, eval_str=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, list[str]]] = {}
    for p in sig.parameters.values():
        group = p.annotation
        if not (isinstance(group, type) and dataclasses.is_dataclass(group)):
            params.append(p)
            continue
        hints = typing.get_type_hints(group, include_extras=True)
        names = [f.name for f in dataclasses.fields(group)]
        params.extend(
            inspect.Parameter(f.name, p.kind, default=f.default, annotation=hints[f.name])
            for f in dataclasses.fields(group)
        )
        groups[p.name] = (group, names)

    @functools.wraps(fn)
    def command(**kwargs: Any) -> Any:
        for name, (group, names) in groups.items():
            kwargs[name] = group(**{n: kwargs.pop(n) for n in names})
        return fn(**kwargs)

    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command  # type: ignore[return-value]


def settings_from(config: Path | None, *groups: dict[str, Any], **flags: Any) -> Settings:
    """The config file's settings (found here or in a parent by default) with the flags on top."""
    from memdiag.config import load_settings
    from memdiag.strategies import validate_settings

    overrides: dict[str, Any] = {}
    for g in groups:
        overrides.update(g)
    overrides.update(flags)
    return validate_settings(load_settings(config).with_overrides(**overrides))
