"""The check spec of docs/reference.md#checks: a YAML file of cases, parsed strictly before
anything runs.

A spec lists cases; each case names a transcript and/or long-term stores, a strategy, and
expectations about memory behaviour:

- ``kept: FACT`` / ``lost: FACT`` (``at_turn``, default the last turn; ``kept_by`` verbatim /
  summary / pinned): the fact is (not) in the window at that turn under the case's strategy;
- ``verdict: V`` / ``in_layer: L`` (``fact`` + ``at_turn``; default every ``forgot`` marker):
  the diagnosis of docs/reference.md#verdicts gives that verdict / layer;
- ``fact_key: K`` (``equals: V``): the facts file holds K (with that value);
- ``max_findings: {kind: n}``: the store audit finds at most n findings of each kind.

Every problem in the spec is an ``InputError`` naming ``file:line`` (exit 2).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdiag.config import (
    ScratchpadSettings,
    Settings,
    SlidingWindowSettings,
    StoreSettings,
    SummarySettings,
)
from memdiag.diagnosis.verdicts import LAYERS, VERDICTS
from memdiag.errors import InputError, UsageError, clip
from memdiag.stores.audit import KINDS as FINDING_KINDS
from memdiag.stores.facts_file import scalar_text
from memdiag.strategies import validate_settings
from memdiag.yamlio import (
    LineDict,
    kind_of,
    line_of,
    load_yaml,
    to_dataclass,
    unknown_key_error,
)

SPEC_VERSION = 1

KEPT_BY = ("verbatim", "summary", "pinned", "memories")

# Expectation kinds and the modifier keys each accepts.
EXPECTATION_KEYS: dict[str, tuple[str, ...]] = {
    "kept": ("at_turn", "kept_by"),
    "lost": ("at_turn",),
    "verdict": ("fact", "at_turn"),
    "in_layer": ("fact", "at_turn"),
    "fact_key": ("equals",),
    "max_findings": (),
}
TRANSCRIPT_KINDS = ("kept", "lost", "verdict", "in_layer")
REPLAY_KINDS = ("kept", "lost")
DIAGNOSIS_KINDS = ("verdict", "in_layer")

TOP_KEYS = ("version", "defaults", "cases")
DEFAULTS_KEYS = ("model", "encoding", "strategy", "transcript", "store")
CASE_KEYS = (
    "name",
    "transcript",
    "conversation",  # which conversation of a chat export / session of an Agents SDK database
    "system",  # the system prompt, for framework state that does not save it (TEXT or @FILE)
    "strategy",
    "store",
    "model",
    "encoding",
    "expect",
)

# `strategy:` mapping keys → Settings field (dotted for sections). Strategy options come from
# the Settings dataclasses, so a new option is accepted in specs as soon as config has it.
_STRATEGY_TOP = {
    "name": "strategy",
    "budget": "budget",
    "keep_system": "keep_system",
    "reserve_output": "reserve_output",
}
_STRATEGY_SECTIONS: dict[str, type] = {
    "sliding_window": SlidingWindowSettings,
    "summary": SummarySettings,
    "scratchpad": ScratchpadSettings,
}
STRATEGY_KEYS: dict[str, str] = dict(_STRATEGY_TOP)
for _section, _cls in _STRATEGY_SECTIONS.items():
    for _f in dataclasses.fields(_cls):
        STRATEGY_KEYS.setdefault(_f.name, f"{_section}.{_f.name}")
STORE_KEYS = tuple(f.name for f in dataclasses.fields(StoreSettings))
_PATH_OPTIONS = ("scratchpad.rules",)  # strategy options that name files (relative to the spec)


# --- the parsed spec ------------------------------------------------------------------------


@dataclass(frozen=True)
class Expectation:
    """One expectation of a case, with the spec line it was written on."""

    kind: str  # one of EXPECTATION_KEYS
    line: int
    subject: str = ""  # the fact (kept/lost), verdict, layer or facts-file key
    fact: str | None = None  # verdict/in_layer: the fact to diagnose (None: the markers)
    at_turn: int | None = None
    at_turn_line: int = 0
    kept_by: str | None = None
    equals: str | None = None
    limits: tuple[tuple[str, int], ...] = ()  # max_findings, in spec order


@dataclass(frozen=True)
class Case:
    """A case ready to run: resolved paths and the settings its strategy and store give."""

    name: str
    line: int
    settings: Settings
    expectations: tuple[Expectation, ...]
    transcript: str | None = None
    strategy_line: int = 0
    conversation: str | None = None  # load(select=): a conversation or SDK session, or "all"
    system: str | None = None  # load(system=): the system prompt a framework's state left out


@dataclass(frozen=True)
class CheckSpec:
    path: str
    cases: tuple[Case, ...]


# --- parsing --------------------------------------------------------------------------------


def path_stat_at(
    p: Path, error: Callable[[str, int | None], InputError], what: str, line: int | None
) -> os.stat_result | None:
    """The stat of a path the spec names (None: nothing there); a name the OS refuses (longer
    than it allows, a loop) is the spec's error at that line, not an internal one."""
    from memdiag.fileio import path_stat

    try:
        return path_stat(p)
    except InputError as e:
        raise error(f"{what}: {e.message} ({clip(p, 120)})", line) from None


class _Parser:
    """Turns the YAML of one spec file into a CheckSpec; every error names file and line."""

    def __init__(self, path: Path, base: Settings) -> None:
        self.path = path
        self.name = str(path)
        self.base = base
        self.root = path.resolve().parent

    def error(self, message: str, line: int | None) -> InputError:
        return InputError(message, path=self.name, line=line)

    def mapping(self, value: Any, what: str, line: int | None, allowed: Sequence[str]) -> LineDict:
        if not isinstance(value, dict):
            raise self.error(
                f"{what} must be a mapping, got {kind_of(value)}", line_of(value) or line
            )
        for key in value:
            if key not in allowed:
                raise unknown_key_error(key, list(allowed), self.name, line_of(value, key))
        return value  # type: ignore[return-value]

    def text(self, value: Any, what: str, line: int | None) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.error(f"{what} must be a string, got {kind_of(value)}", line)
        text = str(value).strip()
        if not text:
            raise self.error(f"{what} must not be empty", line)
        return text

    def path_of(self, value: Any, what: str, line: int | None, *, must_exist: bool = True) -> str:
        """A path relative to the spec file's directory (so a spec runs from any cwd)."""
        text = self.text(value, what, line)
        p = Path(text).expanduser()
        if not p.is_absolute():
            p = self.root / p
        if must_exist and path_stat_at(p, self.error, what, line) is None:
            raise self.error(
                f"{what}: no such file {text!r} (paths are relative to the spec file)", line
            )
        return str(p)

    def parse(self, data: Any) -> CheckSpec:
        if data is None:
            raise self.error("empty spec; expected 'version', 'defaults' and 'cases'", None)
        top = self.mapping(data, "the spec", 1, TOP_KEYS)
        if "version" in top:
            v = top["version"]
            if v != SPEC_VERSION or isinstance(v, bool):
                raise self.error(
                    f"version {v!r} is not supported; this memdiag reads version {SPEC_VERSION}",
                    top.line_of("version"),
                )
        defaults = top.get("defaults")
        if defaults is None:
            defaults = LineDict()
            defaults.line, defaults.key_lines = top.line, {}
        defaults = self.mapping(defaults, "defaults", top.line_of("defaults"), DEFAULTS_KEYS)
        if "cases" not in top:
            raise self.error("missing 'cases': a list of cases to check", top.line)
        cases_raw = top["cases"]
        if not isinstance(cases_raw, list):
            raise self.error(
                f"cases must be a list, got {kind_of(cases_raw)}", top.line_of("cases")
            )
        if not cases_raw:
            raise self.error("cases is empty: add at least one case", top.line_of("cases"))
        lines = getattr(cases_raw, "item_lines", [top.line_of("cases")] * len(cases_raw))
        cases: list[Case] = []
        seen: dict[str, int] = {}
        for raw, line in zip(cases_raw, lines, strict=True):
            case = self.case(raw, line, defaults)
            if case.name in seen:
                raise self.error(
                    f"duplicate case name {case.name!r} (first at line {seen[case.name]})",
                    line_of(raw, "name") or line,
                )
            seen[case.name] = case.line
            cases.append(case)
        return CheckSpec(self.name, tuple(cases))

    def case(self, raw: Any, line: int, defaults: LineDict) -> Case:
        c = self.mapping(raw, "a case", line, CASE_KEYS)
        line = c.line or line
        if "name" not in c:
            raise self.error("case without 'name'", line)
        name = self.text(c["name"], "name", c.line_of("name"))
        if "expect" not in c:
            raise self.error(f"case {name!r} has no 'expect' list", line)
        overrides: dict[str, Any] = {}
        for key in ("model", "encoding"):
            for src in (defaults, c):
                if key in src:
                    overrides[key] = self.text(src[key], key, src.line_of(key))
        strategy_line = line
        for src in (defaults, c):
            if "strategy" in src:
                strategy_line = src.line_of("strategy")
                overrides.update(self.strategy(src["strategy"], strategy_line))
        for src in (defaults, c):
            if "store" in src:
                overrides.update(self.store(src["store"], src.line_of("store")))
        transcript: str | None = None
        given = c if "transcript" in c else defaults if "transcript" in defaults else None
        if given is not None and given["transcript"] is not None:
            transcript = self.path_of(
                given["transcript"], "transcript", given.line_of("transcript")
            )
        try:
            settings = validate_settings(self.base.with_overrides(**overrides))
        except (UsageError, TypeError) as exc:
            raise self.error(f"case {name!r}: {exc}", strategy_line) from None
        expectations = self.expectations(c["expect"], c.line_of("expect"))
        for e in expectations:
            if e.kind in TRANSCRIPT_KINDS and transcript is None:
                raise self.error(
                    f"'{e.kind}' needs a transcript: add 'transcript:' to the case", e.line
                )
            if e.kind in REPLAY_KINDS + DIAGNOSIS_KINDS and settings.strategy == "all":
                raise self.error(
                    f"'{e.kind}' needs one strategy, not 'all': write one case per strategy",
                    strategy_line,
                )
            if e.kind == "fact_key" and not settings.store.facts_file:
                raise self.error("'fact_key' needs store: {facts_file: PATH}", e.line)
            st = settings.store
            has_store = st.facts_file or st.chroma or st.memory_store
            if e.kind == "max_findings" and not has_store:
                raise self.error(
                    "'max_findings' needs a store: {facts_file: PATH}, {chroma: PATH|URL} "
                    "and/or {memory_store: PATH}",
                    e.line,
                )
        conversation = c.get("conversation")
        if conversation is not None and not isinstance(conversation, (str, int)):
            raise self.error(
                "'conversation' must be the id or title of a conversation (or 'all')",
                c.line_of("conversation"),
            )
        chosen = None if conversation is None else str(conversation)
        system = self.system_prompt(c, name)
        return Case(name, line, settings, expectations, transcript, strategy_line, chosen, system)

    def system_prompt(self, c: LineDict, name: str) -> str | None:
        """`system: TEXT`, or `system: "@FILE"` (relative to the spec): docs/framework-state.md."""
        value = c.get("system")
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(
                "'system' must be the system prompt's text or @FILE", c.line_of("system")
            )
        if not value.startswith("@"):
            return value
        from memdiag.fileio import read_text

        path = self.path_of(value[1:], "system", c.line_of("system"))
        try:
            return read_text(path, 16 * 1024**2, "system prompt")
        except InputError as exc:
            raise self.error(f"case {name!r}: system: {exc}", c.line_of("system")) from None

    def strategy(self, raw: Any, line: int) -> dict[str, Any]:
        """`strategy: NAME` or `strategy: {name, budget, ...options}` → Settings overrides."""
        if isinstance(raw, str):
            holder = LineDict({"name": raw})
            holder.line, holder.key_lines = line, {"name": line}
            raw = holder
        s = self.mapping(raw, "strategy", line, list(STRATEGY_KEYS))
        out: dict[str, Any] = {}
        for key, value in s.items():
            target = STRATEGY_KEYS[key]
            typed = self.typed(target, value, s.line_of(key), f"strategy.{key}")
            if target in _PATH_OPTIONS and typed is not None:
                typed = self.path_of(typed, f"strategy.{key}", s.line_of(key))
            out[target] = typed
        return out

    def store(self, raw: Any, line: int) -> dict[str, Any]:
        s = self.mapping(raw, "store", line, STORE_KEYS)
        out: dict[str, Any] = {}
        for key, value in s.items():
            typed = self.typed(f"store.{key}", value, s.line_of(key), f"store.{key}")
            if key in ("facts_file", "memory_store") and typed is not None:
                typed = self.path_of(typed, f"store.{key}", s.line_of(key))
            elif (
                key == "chroma"
                and typed is not None
                and not typed.startswith(("http://", "https://"))
            ):
                typed = self.path_of(typed, "store.chroma", s.line_of(key))
            out[f"store.{key}"] = typed
        return out

    def typed(self, target: str, value: Any, line: int | None, label: str) -> Any:
        """Check ``value`` against the type of Settings field ``target`` (dotted for sections)."""
        cls: type = Settings
        name = target
        if "." in target:
            section, name = target.split(".", 1)
            cls = type(getattr(Settings(), section))
        one = LineDict({name: value})
        one.line, one.key_lines = line or 0, {name: line or 0}
        where = label.rsplit(".", 1)[0]
        return getattr(to_dataclass(cls, one, self.name, where), name)

    def expectations(self, raw: Any, line: int) -> tuple[Expectation, ...]:
        if not isinstance(raw, list):
            raise self.error(f"expect must be a list, got {kind_of(raw)}", line)
        if not raw:
            raise self.error("expect is empty: add at least one expectation", line)
        lines = getattr(raw, "item_lines", [line] * len(raw))
        return tuple(
            self.expectation(item, item_line) for item, item_line in zip(raw, lines, strict=True)
        )

    def expectation(self, raw: Any, line: int) -> Expectation:
        if not isinstance(raw, dict):
            raise self.error(
                f"an expectation must be a mapping such as 'kept: FACT', got {kind_of(raw)}", line
            )
        e: LineDict = raw  # type: ignore[assignment]
        line = e.line or line
        kinds = [k for k in e if k in EXPECTATION_KEYS]
        if not kinds:
            modifiers = sorted({m for ms in EXPECTATION_KEYS.values() for m in ms})
            for key in e:
                if key not in modifiers:
                    raise unknown_key_error(key, list(EXPECTATION_KEYS), self.name, e.line_of(key))
            raise self.error(
                f"expectation without a kind; start it with one of: {', '.join(EXPECTATION_KEYS)}",
                line,
            )
        if len(kinds) > 1:
            raise self.error(
                f"one expectation per list item: got both {kinds[0]!r} and {kinds[1]!r}",
                e.line_of(kinds[1]),
            )
        kind = kinds[0]
        allowed = EXPECTATION_KEYS[kind]
        for key in e:
            if key == kind or key in allowed:
                continue
            if any(key in ms for ms in EXPECTATION_KEYS.values()):
                raise self.error(
                    f"{key!r} does not apply to {kind!r}"
                    + (f"; it takes: {', '.join(allowed)}" if allowed else ""),
                    e.line_of(key),
                )
            raise unknown_key_error(key, [kind, *allowed], self.name, e.line_of(key))
        at_turn = None
        if "at_turn" in e:
            at_turn = e["at_turn"]
            if isinstance(at_turn, bool) or not isinstance(at_turn, int) or at_turn < 1:
                raise self.error(
                    f"at_turn must be a turn number (1 or more), got {at_turn!r}",
                    e.line_of("at_turn"),
                )
        value = e[kind]
        vline = e.line_of(kind)
        if kind in REPLAY_KINDS:
            kept_by = None
            if "kept_by" in e:
                kept_by = self.choice(e["kept_by"], KEPT_BY, "kept_by", e.line_of("kept_by"))
            return Expectation(
                kind,
                line,
                self.text(value, kind, vline),
                at_turn=at_turn,
                at_turn_line=e.line_of("at_turn"),
                kept_by=kept_by,
            )
        if kind in DIAGNOSIS_KINDS:
            choices = VERDICTS if kind == "verdict" else LAYERS
            subject = self.choice(value, choices, kind, vline)
            fact = self.text(e["fact"], "fact", e.line_of("fact")) if "fact" in e else None
            if at_turn is not None and fact is None:
                raise self.error(
                    "at_turn needs fact: (without fact:, every `forgot` marker is checked at its "
                    "own turn)",
                    e.line_of("at_turn"),
                )
            return Expectation(
                kind, line, subject, fact=fact, at_turn=at_turn, at_turn_line=e.line_of("at_turn")
            )
        if kind == "fact_key":
            equals = None
            if "equals" in e:
                equals = scalar_text(e["equals"])
                if equals is None:
                    raise self.error(
                        f"equals must be a string, number or boolean, got {kind_of(e['equals'])}",
                        e.line_of("equals"),
                    )
            return Expectation(kind, line, self.text(value, "fact_key", vline), equals=equals)
        # max_findings
        if not isinstance(value, dict) or not value:
            raise self.error(
                "max_findings must be a mapping of finding kind to a count, e.g. "
                f"{{duplicate: 0, conflict: 0}}; got {kind_of(value)}",
                vline,
            )
        limits = []
        for k, n in value.items():
            kline = line_of(value, k) or vline
            self.choice(k, FINDING_KINDS, "finding kind", kline)
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise self.error(f"max_findings.{k} must be a count (0 or more), got {n!r}", kline)
            limits.append((str(k), n))
        return Expectation(kind, line, limits=tuple(limits))

    def choice(self, value: Any, choices: Sequence[str], what: str, line: int | None) -> str:
        if not isinstance(value, str) or value not in choices:
            hint = difflib.get_close_matches(str(value), list(choices), n=1)
            listed = ", ".join(choices)
            extra = f" (did you mean {hint[0]!r}?)" if hint else f"; choose one of: {listed}"
            raise self.error(f"unknown {what} {value!r}{extra}", line)
        return value


def load_spec(path: str | Path, base: Settings | None = None) -> CheckSpec:
    """Read and validate a check spec; ``base`` holds the config-file settings cases start from."""
    p = Path(path)
    return _Parser(p, base or Settings()).parse(load_yaml(p))


DEFAULT_SPEC = "memdiag-checks.yaml"


def default_spec(start: str | Path | None = None) -> Path:
    """``memdiag-checks.yaml`` in ``start`` (default: the current directory) or the nearest
    parent holding one: what `memdiag check` runs when no spec is named."""
    from memdiag.config import find_upward

    found = find_upward(DEFAULT_SPEC, start)
    if found is None:
        here = Path(start if start is not None else Path.cwd()).absolute()
        raise UsageError(
            f"no check spec given and no {DEFAULT_SPEC} in {clip(here, 200)} or its parents; "
            "name one: memdiag check SPEC.yaml (docs/ci.md)"
        )
    return found
