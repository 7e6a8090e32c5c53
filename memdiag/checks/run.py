"""The runner of `memdiag check`: each case's expectations against replay, diagnose and audit.

Running returns plain frozen result objects; rendering lives in ``memdiag.render``. Cases are
independent, so ``jobs > 1`` runs them in worker processes with results identical to a serial
run, in spec order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memdiag.checks.spec import (
    DIAGNOSIS_KINDS,
    REPLAY_KINDS,
    TRANSCRIPT_KINDS,
    Case,
    CheckSpec,
    Expectation,
    load_spec,
)
from memdiag.config import Settings
from memdiag.errors import InputError, UsageError

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

    from memdiag.recorder import RecordedReplay
    from memdiag.replay import ReplayContext
    from memdiag.stores.audit import AuditReport, Finding
    from memdiag.stores.open import LongTermStores
    from memdiag.survival import FactSurvival
    from memdiag.transcript.model import Transcript

MECHANISM_TEXT = {
    "evicted": "evicted",
    "summarized_away": "summarized away",
    "session_end": "session ended",
    "unpinned": "unpinned",
}


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
    # the case's replay context, kept when asked (the --html report replays from it)
    context: ReplayContext | None = field(default=None, compare=False, repr=False)
    # with it, the case's replays of the whole transcript (the report shows them as they are)
    replays: tuple[RecordedReplay, ...] = field(default=(), compare=False, repr=False)


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


# --- running --------------------------------------------------------------------------------


class _Outcome:
    """Failures collected while a case runs, each with its spec line."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.lines: list[int] = []

    def fail(self, line: int, message: str) -> None:
        self.failures.append(message)
        self.lines.append(line)


def run_case(case: Case, spec_path: str = "", keep_context: bool = False) -> CaseResult:
    """Run one case. Spec errors found only now (a turn past the end) raise InputError.

    ``keep_context``: the result carries the case's replay context (for the --html report)."""
    start = time.perf_counter()
    out = _Outcome()
    exps = case.expectations
    transcript = None
    rctx: ReplayContext | None = None
    recorded: list[RecordedReplay] = []
    stores: LongTermStores | None = None
    try:
        if any(e.kind in TRANSCRIPT_KINDS for e in exps):
            assert case.transcript is not None
            transcript = _read(case)
            if not transcript.turns:
                raise InputError(
                    f"case {case.name!r}: {case.transcript} has no user messages, so no turns",
                    path=spec_path or None,
                    line=case.line,
                )
            s = case.settings.store
            needs_replay = any(e.kind in REPLAY_KINDS for e in exps)
            needs_diagnosis = any(e.kind in DIAGNOSIS_KINDS for e in exps)
            from memdiag.stores.open import LongTermStores, profile_memory

            if needs_diagnosis and (s.facts_file or s.chroma or s.memory_store):
                stores = LongTermStores.from_settings(case.settings)
            if needs_replay:
                from memdiag.replay import prepare

                # the facts file is injected whole at session start (docs/reference.md#verdicts),
                # so its tokens
                # squeeze the window exactly as they do in `diagnose`; kept/lost need only
                # the profile, not the vector store
                memory_text, memory_tokens = (
                    stores.profile_section(case.settings)
                    if stores is not None
                    else profile_memory(case.settings)
                )
                rctx = prepare(
                    transcript, case.settings, memory_tokens=memory_tokens, memory_text=memory_text
                )
                recorded = _check_replay(case, rctx, spec_path, out, record=keep_context)
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
        context=rctx if keep_context else None,
        replays=tuple(recorded) if keep_context else (),
    )


# the transcripts a check run's cases read, by file, selection and the file's state: the
# cases over one file (other strategies, budgets, facts) read it once and, holding the same
# transcript, count and index it once (run_context.transcripts_shared); a file that changed is
# read again. None outside a run (``reads_shared``): a case run alone reads its file.
_READ: dict[tuple[object, ...], Transcript] | None = None
READ_MESSAGES = 200_000  # the messages kept in all, the least recently used transcript out


@contextlib.contextmanager
def reads_shared() -> Iterator[None]:
    """Within: the cases run in this process share what they read and count (``_read``):
    a check run, a worker of one, the pytest plugin's cases of one spec file."""
    global _READ
    from memdiag.run_context import transcripts_shared

    outer = _READ
    if outer is None:
        _READ = {}
    try:
        with transcripts_shared():
            yield
    finally:
        if outer is None:
            _READ = None


_WORKER_SHARING = contextlib.ExitStack()  # a worker's, entered once, never left


def _share_in_worker() -> None:
    """A worker process's cases share what they read for its lifetime (the pool's)."""
    _WORKER_SHARING.enter_context(reads_shared())


def _read(case: Case) -> Transcript:
    """The case's transcript, read once per check run however many cases name it."""
    import os

    from memdiag.transcript import load

    path = case.transcript
    assert path is not None
    shared = _READ
    try:
        st = os.stat(path) if shared is not None else None
    except OSError:  # the reader says what is wrong with it
        st = None
    if shared is None or st is None:
        return load(path, select=case.conversation, system=case.system)
    key = (path, case.conversation, case.system, st.st_ino, st.st_size, st.st_mtime_ns)
    found = shared.pop(key, None)  # put back last: the most recently used
    if found is None:
        found = load(path, select=case.conversation, system=case.system)
    shared[key] = found
    held = sum(len(t.messages) for t in shared.values())
    while len(shared) > 1 and held > READ_MESSAGES:
        held -= len(shared.pop(next(iter(shared))).messages)
    return found


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


def _check_replay(
    case: Case, rctx: ReplayContext, spec_path: str, out: _Outcome, record: bool = False
) -> list[RecordedReplay]:
    """kept/lost: one replay per (turn) for all facts checked at that turn.

    ``record``: the replay to the last turn records its texts and is returned (for --html)."""
    from memdiag.recorder import RecordedReplay, TextRecorder
    from memdiag.replay import replay

    t = rctx.transcript
    exps = [e for e in case.expectations if e.kind in REPLAY_KINDS]
    recorded: list[RecordedReplay] = []
    if not exps:
        return recorded
    strategy = case.settings.strategy
    by_turn: dict[int, list[Expectation]] = {}
    for e in exps:
        by_turn.setdefault(_turn(e, t, spec_path, len(t.turns)), []).append(e)
    verdicts: dict[int, str | None] = {}  # expectation index → failure message
    for turn, group in by_turn.items():
        facts = list(dict.fromkeys(e.subject for e in group))
        recorder = TextRecorder(t) if record and turn == len(t.turns) else None
        observe = recorder(strategy) if recorder is not None else None
        res = replay(rctx, strategy, facts, until_turn=turn, observe=observe)
        if recorder is not None:
            recorded.append(RecordedReplay(res, recorder.texts(strategy)))
        survival = {f.fact: f for f in res.facts}
        for e in group:
            verdicts[id(e)] = _judge_replay(e, survival[e.subject], turn)
    where = f"under {strategy} (budget {rctx.budget})"
    for e in exps:
        message = verdicts[id(e)]
        if message is not None:
            turn = e.at_turn if e.at_turn is not None else len(t.turns)
            what = f"{e.kind} {e.subject!r}" + (f" ({e.kept_by})" if e.kept_by else "")
            out.fail(e.line, f"{what} at turn {turn} {where}: {message}")
    return recorded


def _judge_replay(e: Expectation, s: FactSurvival, turn: int) -> str | None:
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
    case: Case,
    transcript: Transcript,
    stores: LongTermStores | None,
    spec_path: str,
    out: _Outcome,
) -> None:
    """verdict/in_layer: diagnose the named failures (or every marker) in one pass."""
    from memdiag.diagnosis import Failure, diagnose, marker_failures

    exps = [e for e in case.expectations if e.kind in DIAGNOSIS_KINDS]
    if not exps:
        return
    markers = marker_failures(transcript)
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
            got = d.verdict.value if e.kind == "verdict" else d.layer.value
            if got == e.subject:
                continue
            where = f"turn {f.at_turn}" + (f" ({f.marker_id})" if f.marker_id else "")
            detail = f"got {d.verdict.value} (layer {d.layer.value})"
            det = d.details
            if det.lost_at_turn is not None:
                mech = det.mechanism or "evicted"
                mech = MECHANISM_TEXT.get(mech, mech)
                detail += f", lost at turn {det.lost_at_turn} ({mech})"
            elif det.kept_by:
                detail += f", kept {det.kept_by}"
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
    by_kind: dict[str, list[Finding]] = {}
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


def _finding_text(f: Finding) -> str:
    ids = ", ".join(str(i) for i in list(f.ids)[:4])
    return f"{f.message}" + (f" [{ids}]" if ids else "")


def _audit(settings: Settings) -> AuditReport:
    """Audit the case's facts file and/or Chroma store (read-only, as inspect-store does)."""
    from memdiag.stores.audit import audit
    from memdiag.stores.open import LongTermStores

    with LongTermStores.from_settings(settings) as stores:
        others = [stores.memory] if stores.memory is not None else []
        return audit(stores.facts, stores.chroma, stores.collection, settings.audit, others=others)


KEPT_MESSAGES = 200_000  # contexts kept for the --html report: memory stays bounded


def _run_indexed(args: tuple[Case, str], keep_context: bool = False) -> CaseResult:
    # Top-level so worker processes can unpickle it by reference.
    return run_case(*args, keep_context=keep_context)


def _run_in_worker(
    args: tuple[Case, str], keep_context: bool = False
) -> tuple[CaseResult, list[str]]:
    """A case in a worker process, and where it looked for the embedding model in vain (the
    parent names a missing model once, as a serial run does). ``keep_context``: the result
    carries the case's context and replays back (pickled without the encoding or the run's
    caches: ReplayContext.__reduce__), so the report need not count and search again."""
    from memdiag.stores.embeddings import take_model_misses

    result = run_case(*args, keep_context=keep_context)
    return result, take_model_misses()


def _worker_context(spec: CheckSpec) -> BaseContext:
    """How to start workers: fork a warmed-up parent where that is safe, else spawn.

    A spawned worker imports memdiag and loads its encoding again (about a second of start-up
    per worker, which many small cases never win back). Forking a parent that has already
    loaded the encodings and the modules the cases need starts workers at once. Fork is safe
    only while this process runs a single thread, native ones included (a forked child would
    inherit another thread's locks mid-state: chromadb and onnxruntime start threads), and
    only on Linux (macOS system libraries do not survive fork; Windows has no fork). Results
    are the same either way: a case reads everything it checks from its own files.
    """
    import multiprocessing

    from memdiag.threads import os_threads

    if os_threads() == 1:
        _warm_up(spec)
        if os_threads() == 1:  # warming up started no thread
            return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _warm_up(spec: CheckSpec) -> None:
    """Load what the cases need (modules, rules, encodings) once, before forking."""
    import contextlib
    import importlib

    from memdiag.errors import MemdiagError
    from memdiag.extract import default_extractor

    # none of these imports chromadb, numpy or onnxruntime (a case opening a store does)
    for module in (
        "memdiag.transcript",
        "memdiag.replay",
        "memdiag.diagnosis",
        "memdiag.strategies.sliding_window",
        "memdiag.strategies.summary",
        "memdiag.strategies.scratchpad",
    ):
        importlib.import_module(module)
    default_extractor()
    for settings in {id(c.settings): c.settings for c in spec.cases}.values():
        # the case itself reports a bad model or encoding when it runs, as a serial run does
        with contextlib.suppress(MemdiagError):
            settings.token_counter()  # the encoding stays cached for the process's lifetime


def run_checks(
    spec: CheckSpec,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    keep_contexts: bool = False,
) -> CheckReport:
    """Run every case; ``jobs > 1`` uses worker processes. Results are in spec order either way.

    ``progress(done)`` is called as cases finish (in order). ``keep_contexts``: the results
    carry their replay contexts (from worker processes too), up to about KEPT_MESSAGES
    messages in all: a larger suite's report reads the rest again.
    """
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    work = [(c, spec.path) for c in spec.cases]
    workers = min(jobs, len(work))
    results: list[CaseResult] = []
    room = KEPT_MESSAGES if keep_contexts else 0

    def keep(result: CaseResult) -> CaseResult:
        nonlocal room
        if result.context is not None:
            if room <= 0:  # past the bound (a worker kept it not knowing): the report reloads
                return dataclasses.replace(result, context=None, replays=())
            room -= len(result.context.transcript.messages)
        return result

    if workers <= 1:
        with reads_shared():
            for w in work:
                results.append(keep(_run_indexed(w, room > 0)))
                if progress is not None:
                    progress(len(results))
    else:
        import functools
        from concurrent.futures import ProcessPoolExecutor

        ctx = _worker_context(spec)
        # a few chunks per worker: one round trip per chunk instead of per case, and still
        # balanced when cases differ in size
        chunk = max(1, -(-len(work) // (workers * 4)))
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=_share_in_worker
        ) as pool:
            # map() yields in submission order and re-raises a case's error at its position, so
            # the first error reported is the one a serial run would have stopped at.
            from memdiag.stores.embeddings import note_model_miss

            run = functools.partial(_run_in_worker, keep_context=keep_contexts)
            for result, misses in pool.map(run, work, chunksize=chunk):
                results.append(keep(result))
                for tried in misses:
                    note_model_miss(tried)
                if progress is not None:
                    progress(len(results))
    passed = sum(1 for r in results if r.passed)
    return CheckReport(results, passed, len(results) - passed, spec.path)


def check(
    path: str | Path,
    base: Settings | None = None,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
    keep_contexts: bool = False,
) -> CheckReport:
    """Load, validate and run a check spec (the core of `memdiag check`).

    ``progress(done, total)`` is called as cases finish; ``keep_contexts``: see run_checks.
    """
    spec = load_spec(path, base)
    total = len(spec.cases)
    tick = None if progress is None else (lambda done: progress(done, total))
    return run_checks(spec, jobs, tick, keep_contexts)
