"""The CI spec runner of SPEC §8: memory regression checks from a YAML spec.

A spec lists cases; each case names a transcript and/or long-term stores, a strategy, and
expectations about memory behaviour:

- ``kept: FACT`` / ``lost: FACT`` (``at_turn``, default the last turn; ``kept_by`` verbatim /
  summary / pinned): the fact is (not) in the window at that turn under the case's strategy;
- ``verdict: V`` / ``in_layer: L`` (``fact`` + ``at_turn``; default every ``forgot`` marker):
  the diagnosis of SPEC §7 gives that verdict / layer;
- ``fact_key: K`` (``equals: V``): the facts file holds K (with that value);
- ``max_findings: {kind: n}``: the store audit finds at most n findings of each kind.

Parsing is strict: every problem in the spec is an ``InputError`` naming ``file:line`` (exit 2),
detected before any case runs. Running returns plain frozen result objects; rendering lives in
``memdiag.render``. Cases are independent, so ``jobs > 1`` runs them in worker processes with
results identical to a serial run, in spec order.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdiag.config import (
    ScratchpadSettings,
    Settings,
    SlidingWindowSettings,
    StoreSettings,
    SummarySettings,
)
from memdiag.errors import InputError, UsageError
from memdiag.stores.audit import KINDS as FINDING_KINDS
from memdiag.strategies import validate_settings
from memdiag.yamlio import LineDict, LineList, load_yaml, to_dataclass, unknown_key_error

if TYPE_CHECKING:
    from memdiag.replay import ReplayContext
    from memdiag.transcript.model import Transcript

SPEC_VERSION = 1

KEPT_BY = ("verbatim", "summary", "pinned", "memories")
MECHANISM_TEXT = {
    "evicted": "evicted",
    "summarized_away": "summarized away",
    "session_end": "session ended",
    "unpinned": "unpinned",
}

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
CASE_KEYS = ("name", "transcript", "strategy", "store", "model", "encoding", "expect")

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


@dataclass(frozen=True)
class CheckSpec:
    path: str
    cases: tuple[Case, ...]


# --- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one case. ``failure_lines[i]`` is the spec line of ``failures[i]``."""

    name: str
    passed: bool
    failures: list[str]
    line: int
    duration_s: float
    failure_lines: list[int] = field(default_factory=list)
    expectations: int = 0


@dataclass(frozen=True)
class CheckReport:
    """All case results in spec order, with the counts of passed and failed cases."""

    cases: list[CaseResult]
    passed: int
    failed: int
    spec: str = ""

    @property
    def ok(self) -> bool:
        return self.failed == 0


# --- parsing --------------------------------------------------------------------------------


def _kind(value: Any) -> str:
    # isinstance, not type(): YAML mappings and lists arrive as LineDict / LineList
    for tp, name in (
        (bool, "a boolean"),
        (dict, "a mapping"),
        (list, "a list"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
    ):
        if isinstance(value, tp):
            return name
    return "nothing" if value is None else type(value).__name__


def _line(obj: Any, key: Any = None, default: int | None = None) -> int | None:
    if isinstance(obj, LineDict):
        return obj.line_of(key) if key is not None else obj.line
    if isinstance(obj, LineList):
        return obj.line
    return default


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
            raise self.error(f"{what} must be a mapping, got {_kind(value)}", _line(value) or line)
        for key in value:
            if key not in allowed:
                raise unknown_key_error(key, list(allowed), self.name, _line(value, key))
        return value  # type: ignore[return-value]

    def text(self, value: Any, what: str, line: int | None) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.error(f"{what} must be a string, got {_kind(value)}", line)
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
        if must_exist and not p.exists():
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
            raise self.error(f"cases must be a list, got {_kind(cases_raw)}", top.line_of("cases"))
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
                    _line(raw, "name", line),
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
            has_store = settings.store.facts_file or settings.store.chroma
            if e.kind == "max_findings" and not has_store:
                raise self.error(
                    "'max_findings' needs a store: {facts_file: PATH} and/or {chroma: PATH|URL}",
                    e.line,
                )
        return Case(name, line, settings, expectations, transcript, strategy_line)

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
            if key == "facts_file" and typed is not None:
                typed = self.path_of(typed, "store.facts_file", s.line_of(key))
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
            raise self.error(f"expect must be a list, got {_kind(raw)}", line)
        if not raw:
            raise self.error("expect is empty: add at least one expectation", line)
        lines = getattr(raw, "item_lines", [line] * len(raw))
        return tuple(
            self.expectation(item, item_line) for item, item_line in zip(raw, lines, strict=True)
        )

    def expectation(self, raw: Any, line: int) -> Expectation:
        if not isinstance(raw, dict):
            raise self.error(
                f"an expectation must be a mapping such as 'kept: FACT', got {_kind(raw)}", line
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
            from memdiag.diagnose import LAYER, LAYERS

            choices = tuple(LAYER) if kind == "verdict" else LAYERS
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
                equals = _scalar_text(e["equals"])
                if equals is None:
                    raise self.error(
                        f"equals must be a string, number or boolean, got {_kind(e['equals'])}",
                        e.line_of("equals"),
                    )
            return Expectation(kind, line, self.text(value, "fact_key", vline), equals=equals)
        # max_findings
        if not isinstance(value, dict) or not value:
            raise self.error(
                "max_findings must be a mapping of finding kind to a count, e.g. "
                f"{{duplicate: 0, conflict: 0}}; got {_kind(value)}",
                vline,
            )
        limits = []
        for k, n in value.items():
            kline = _line(value, k, vline)
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


def _scalar_text(v: Any) -> str | None:
    # The same text the facts-file reader gives scalars, so `equals: 30` matches {"age": 30}.
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return json.dumps(v)
    return None


def load_spec(path: str | Path, base: Settings | None = None) -> CheckSpec:
    """Read and validate a check spec; ``base`` holds the config-file settings cases start from."""
    p = Path(path)
    return _Parser(p, base or Settings()).parse(load_yaml(p))


# --- running --------------------------------------------------------------------------------


class _Outcome:
    """Failures collected while a case runs, each with its spec line."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.lines: list[int] = []

    def fail(self, line: int, message: str) -> None:
        self.failures.append(message)
        self.lines.append(line)


def run_case(case: Case, spec_path: str = "") -> CaseResult:
    """Run one case. Spec errors found only now (a turn past the end) raise InputError."""
    start = time.perf_counter()
    out = _Outcome()
    exps = case.expectations
    transcript = None
    stores: Any = None
    try:
        if any(e.kind in TRANSCRIPT_KINDS for e in exps):
            from memdiag.transcript import load

            assert case.transcript is not None
            transcript = load(case.transcript)
            if not transcript.turns:
                raise InputError(
                    f"case {case.name!r}: {case.transcript} has no user messages, so no turns",
                    path=spec_path or None,
                    line=case.line,
                )
            s = case.settings.store
            needs_replay = any(e.kind in REPLAY_KINDS for e in exps)
            needs_diagnosis = any(e.kind in DIAGNOSIS_KINDS for e in exps)
            from memdiag.longterm import LongTermStores

            if needs_diagnosis and (s.facts_file or s.chroma):
                stores = LongTermStores.from_settings(case.settings)
            elif needs_replay and s.facts_file:
                # kept/lost only need the profile's injected tokens, not the vector store
                stores = LongTermStores.open(s.facts_file, None, None)
            if needs_replay:
                from memdiag.replay import prepare

                # the facts file is injected whole at session start (SPEC §7), so its tokens
                # squeeze the window exactly as they do in `diagnose`
                memory_text, memory_tokens = (
                    stores.profile_section(case.settings) if stores is not None else ("", 0)
                )
                rctx = prepare(
                    transcript, case.settings, memory_tokens=memory_tokens, memory_text=memory_text
                )
                _check_replay(case, rctx, spec_path, out)
            if needs_diagnosis:
                _check_diagnoses(case, transcript, stores, spec_path, out)
        _check_facts_file(case, out)
        _check_audit(case, out)
    finally:
        if stores is not None:
            stores.close()
    # checks run grouped by kind (one replay, one diagnosis pass); report them in spec order
    ordered = sorted(zip(out.lines, out.failures, strict=True), key=lambda pair: pair[0])
    return CaseResult(
        name=case.name,
        passed=not ordered,
        failures=[text for _, text in ordered],
        line=case.line,
        duration_s=time.perf_counter() - start,
        failure_lines=[line for line, _ in ordered],
        expectations=len(exps),
    )


def _turn(e: Expectation, transcript: Transcript, spec_path: str, default: int) -> int:
    turn = e.at_turn if e.at_turn is not None else default
    n = len(transcript.turns)
    if not 1 <= turn <= n:
        raise InputError(
            f"at_turn {turn}: {Path(transcript.path).name} has turns 1..{n}",
            path=spec_path or None,
            line=e.at_turn_line or e.line,
        )
    return turn


def _check_replay(case: Case, rctx: ReplayContext, spec_path: str, out: _Outcome) -> None:
    """kept/lost: one replay per (turn) for all facts checked at that turn."""
    from memdiag.replay import replay

    t = rctx.transcript
    exps = [e for e in case.expectations if e.kind in REPLAY_KINDS]
    if not exps:
        return
    strategy = case.settings.strategy
    by_turn: dict[int, list[Expectation]] = {}
    for e in exps:
        by_turn.setdefault(_turn(e, t, spec_path, len(t.turns)), []).append(e)
    verdicts: dict[int, str | None] = {}  # expectation index → failure message
    for turn, group in by_turn.items():
        facts = list(dict.fromkeys(e.subject for e in group))
        survival = {f.fact: f for f in replay(rctx, strategy, facts, until_turn=turn).facts}
        for e in group:
            verdicts[id(e)] = _judge_replay(e, survival[e.subject], turn)
    where = f"under {strategy} (budget {rctx.budget})"
    for e in exps:
        message = verdicts[id(e)]
        if message is not None:
            turn = e.at_turn if e.at_turn is not None else len(t.turns)
            what = f"{e.kind} {e.subject!r}" + (f" ({e.kept_by})" if e.kept_by else "")
            out.fail(e.line, f"{what} at turn {turn} {where}: {message}")


def _judge_replay(e: Expectation, s: Any, turn: int) -> str | None:
    """None when the expectation holds, else what happened instead."""
    kept = s.kept_by is not None and s.lost_at_turn is None
    if s.stated_at_turn is None:
        # A fact that never reached the window is neither kept nor meaningfully lost: the
        # expectation is almost certainly a typo, so it fails rather than passing vacuously.
        return f"never stated up to turn {turn} (no message matches it; check the fact text)"
    if e.kind == "kept":
        if not kept:
            mech = MECHANISM_TEXT.get(s.mechanism or "", s.mechanism or "not kept")
            if s.lost_at_turn is None:
                return f"not kept ({mech})"
            return f"lost at turn {s.lost_at_turn} ({mech})"
        if e.kept_by is not None and s.kept_by != e.kept_by:
            return f"kept {s.kept_by}, not {e.kept_by}"
        return None
    if kept:
        return f"still in the window ({s.kept_by}; stated at turn {s.stated_at_turn})"
    return None


def _check_diagnoses(
    case: Case, transcript: Transcript, stores: Any, spec_path: str, out: _Outcome
) -> None:
    """verdict/in_layer: diagnose the named failures (or every marker) in one pass."""
    from memdiag.diagnose import LAYER, Failure, diagnose

    exps = [e for e in case.expectations if e.kind in DIAGNOSIS_KINDS]
    if not exps:
        return
    markers = [
        Failure(m.forgot, m.turn, m.id) for m in transcript.messages if m.forgot and m.turn > 0
    ]
    plan: list[tuple[Expectation, list[Failure]]] = []
    for e in exps:
        if e.fact is None:
            if not markers:
                raise InputError(
                    f"'{e.kind}' without fact: checks `forgot` markers, and "
                    f"{Path(transcript.path).name} has none; add fact: (and at_turn:)",
                    path=spec_path or None,
                    line=e.line,
                )
            plan.append((e, markers))
        elif e.at_turn is None and (
            same := [f for f in markers if f.fact.casefold().strip() == e.fact.casefold().strip()]
        ):
            plan.append((e, same))  # fact: of a marked failure → that marker's turn
        else:
            turn = _turn(e, transcript, spec_path, len(transcript.turns))
            plan.append((e, [Failure(e.fact, turn)]))
    unique = list(dict.fromkeys(f for _, fs in plan for f in fs))
    diagnoses = diagnose(transcript, case.settings, unique, stores, what_if=False)
    results = dict(zip(unique, diagnoses, strict=True))
    for e, failures in plan:
        for f in failures:
            d = results[f]
            got = d.verdict if e.kind == "verdict" else d.layer
            if got == e.subject:
                continue
            where = f"turn {f.at_turn}" + (f" ({f.marker_id})" if f.marker_id else "")
            detail = f"got {d.verdict} (layer {LAYER.get(d.verdict, d.layer)})"
            if d.details.get("lost_at_turn") is not None:
                mech = d.details.get("mechanism") or "evicted"
                mech = MECHANISM_TEXT.get(mech, mech)
                detail += f", lost at turn {d.details['lost_at_turn']} ({mech})"
            elif d.details.get("kept_by"):
                detail += f", kept {d.details['kept_by']}"
            out.fail(e.line, f"{e.kind} {e.subject} for {f.fact!r} at {where}: {detail}")


def _check_facts_file(case: Case, out: _Outcome) -> None:
    exps = [e for e in case.expectations if e.kind == "fact_key"]
    if not exps:
        return
    from memdiag.stores.facts_file import load_facts_file

    assert case.settings.store.facts_file is not None
    facts = load_facts_file(case.settings.store.facts_file)
    name = Path(facts.path).name
    for e in exps:
        entry = facts.lookup(e.subject)
        what = f"fact_key {e.subject!r}" + (f" equals {e.equals!r}" if e.equals is not None else "")
        if entry is None:
            keys = ", ".join(list(facts.as_dict())[:10]) or "none"
            out.fail(e.line, f"{what}: no such key in {name} (keys: {keys})")
        elif e.equals is not None and entry.value != e.equals:
            at = f" (line {entry.line})" if entry.line else ""
            out.fail(e.line, f"{what}: {name} has {entry.key!r} = {entry.value!r}{at}")


def _check_audit(case: Case, out: _Outcome) -> None:
    exps = [e for e in case.expectations if e.kind == "max_findings"]
    if not exps:
        return
    report = _audit(case.settings)
    by_kind: dict[str, list[Any]] = {}
    for finding in report.findings:
        by_kind.setdefault(finding.kind, []).append(finding)
    for e in exps:
        for kind, limit in e.limits:
            found = by_kind.get(kind, [])
            if len(found) <= limit:
                continue
            shown = "; ".join(_finding_text(f) for f in found[:3])
            more = f"; … (+{len(found) - 3})" if len(found) > 3 else ""
            out.fail(e.line, f"max_findings {kind} ≤ {limit}: found {len(found)}: {shown}{more}")


def _finding_text(f: Any) -> str:
    ids = ", ".join(str(i) for i in list(getattr(f, "ids", ()))[:4])
    return f"{f.message}" + (f" [{ids}]" if ids else "")


def _audit(settings: Settings) -> Any:
    """Audit the case's facts file and/or Chroma store (read-only, as inspect-store does)."""
    from memdiag.longterm import LongTermStores
    from memdiag.stores.audit import audit

    with LongTermStores.from_settings(settings) as stores:
        return audit(stores.facts, stores.chroma, stores.collection, settings.audit)


def _run_indexed(args: tuple[Case, str]) -> CaseResult:
    # Top-level so worker processes can unpickle it by reference.
    return run_case(*args)


def run_checks(
    spec: CheckSpec, jobs: int = 1, progress: Callable[[int], None] | None = None
) -> CheckReport:
    """Run every case; ``jobs > 1`` uses worker processes. Results are in spec order either way.

    ``progress(done)`` is called as cases finish (in order).
    """
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    work = [(c, spec.path) for c in spec.cases]
    workers = min(jobs, len(work))
    results: list[CaseResult] = []
    if workers <= 1:
        for w in work:
            results.append(_run_indexed(w))
            if progress is not None:
                progress(len(results))
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: a forked child would inherit chromadb/tokenizer threads and locks
        # mid-state; workers import memdiag afresh, so results match a serial run exactly.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            # map() yields in submission order and re-raises a case's error at its position, so
            # the first error reported is the one a serial run would have stopped at.
            for result in pool.map(_run_indexed, work):
                results.append(result)
                if progress is not None:
                    progress(len(results))
    passed = sum(1 for r in results if r.passed)
    return CheckReport(results, passed, len(results) - passed, spec.path)


def check(
    path: str | Path,
    base: Settings | None = None,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> CheckReport:
    """Load, validate and run a check spec (the core of `memdiag check`).

    ``progress(done, total)`` is called as cases finish.
    """
    spec = load_spec(path, base)
    total = len(spec.cases)
    tick = None if progress is None else (lambda done: progress(done, total))
    return run_checks(spec, jobs, tick)


__all__ = [
    "FINDING_KINDS",
    "Case",
    "CaseResult",
    "CheckReport",
    "CheckSpec",
    "Expectation",
    "check",
    "load_spec",
    "run_case",
    "run_checks",
]
