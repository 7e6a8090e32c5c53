"""A diagnosis in words, as (label, value) lines: what the console panel and the HTML report's
cards show. JSON keeps every field (``Diagnosis.to_dict``); these lines say what they mean.

Evidence shows what states the fact: the candidates that reach the calibrated threshold
(``stated`` in JSON), best score first, each session named once. Candidates below it, the
failing turn's own message, and tool results that are JSON data stay in ``--format json``.
When nothing states the fact, the nearest readable candidate is shown, marked as below the
threshold (docs: the README's "diagnose" section explains the threshold).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memdiag.diagnosis.verdicts import Details, Diagnosis
    from memdiag.facts import Evidence

LAYER_WORDS = {
    "short_term": "short-term layer (this conversation's window)",
    "long_term": "long-term layer (the stores across sessions)",
    "none": "no layer: memory delivered it",
}
FLAG_WORDS = {
    "no_store_checked": "no long-term store was given to check",
    "strong_fact_in_vector_store": "a strong fact kept only in the vector store",
    "strong_fact_in_memory_store": "a strong fact kept only in a memory store, not by exact key",
    "opaque_compaction": "the request was compacted by the provider (its content is opaque)",
    "conflict_in_context": "a conflicting value was in the window too",
}
MECHANISM_WORDS = {
    "evicted": "evicted",
    "summarized_away": "summarized away",
    "session_end": "the session ended",
    "unpinned": "unpinned",
    "compacted": "compacted",
}
QUOTE_CHARS = 160


@dataclass(frozen=True)
class Line:
    """One row of a diagnosis: ``label`` (empty: continues the row above) and its value.
    ``quote`` is message text, shown apart from the words around it (italic, quoted)."""

    label: str
    value: str
    quote: str | None = None
    style: str = ""
    id: str | None = None  # the message the value starts with (the report links it)


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 message', '2 messages'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def clip(text: str, n: int = QUOTE_CHARS) -> str:
    """Message text on one line, cut at a word boundary near ``n`` characters."""
    text = " ".join(text.split())
    if len(text) <= n:
        return text
    cut = text.rfind(" ", 0, n - 1)
    return text[: cut if cut > n // 2 else n - 1].rstrip(" ,;:") + "…"


def is_data(text: str) -> bool:
    """A tool result that is JSON data (a list or an object), not a sentence."""
    s = text.strip()
    if not s or s[0] not in "[{":
        return False
    import json

    try:
        json.loads(s)
    except ValueError:
        return False
    return True


def shown_evidence(d: Diagnosis) -> tuple[list[Evidence], bool]:
    """The evidence worth reading and whether it states the fact: the stated candidates, best
    score first; else the nearest readable candidate (empty when there is none)."""
    stated = [e for e in d.evidence if e.passes]
    if stated:
        order = {id(e): k for k, e in enumerate(d.evidence)}
        return sorted(stated, key=lambda e: (-e.score, order[id(e)])), True
    from memdiag.text import states_something

    readable = [
        e
        for e in d.evidence
        if e.turn != d.at_turn and not is_data(e.text) and states_something(e.text)
    ]
    return readable[:1], False


def evidence_lines(d: Diagnosis) -> list[Line]:
    shown, stated = shown_evidence(d)
    lines: list[Line] = []
    if not stated:
        searched = d.details.searched or "no message before the turn"
        lines.append(Line("evidence", f"nothing states it ({searched})"))
        for e in shown:
            lines.append(
                Line(
                    "nearest",
                    f"{e.id}, turn {e.turn} of session {e.session}, {e.method} {e.score:.2f}, "
                    "below the threshold:",
                    clip(e.text),
                    id=e.id,
                )
            )
        return lines
    sessions = list(dict.fromkeys(e.session for e in shown))
    label = "stated in"
    lines.append(Line(label, "session " + ", ".join(sessions)))
    current = None
    for k, e in enumerate(shown):
        where = f"{e.id}, turn {e.turn}"
        if len(sessions) > 1 and e.session != current:
            where += f" of session {e.session}"
        current = e.session
        lines.append(
            Line("evidence" if not k else "", f"{where} ({_method(e)}):", clip(e.text), id=e.id)
        )
    hidden = len(d.evidence) - len(shown)
    if hidden:
        lines.append(
            Line("", f"{plural(hidden, 'weaker candidate')} in --format json", style="dim")
        )
    return lines


def _method(e: Evidence) -> str:
    name = {"exact": "exact match", "given": "named by the dataset"}.get(e.method, e.method)
    return name if e.method in ("exact", "given") else f"{name} {e.score:.2f}"


def diagnosis_lines(d: Diagnosis) -> list[Line]:
    """Every row of a diagnosis, in reading order: verdict, evidence, what happened, fixes."""
    lines = [Line("verdict", d.verdict.value, style="verdict")]
    layer = LAYER_WORDS.get(d.layer.value, d.layer.value)
    if d.verdict.value == "never_stated":
        layer = "no layer: nothing before the turn states it"
    lines.append(Line("layer", layer))
    if d.flags:
        lines.append(
            Line("flags", "; ".join(FLAG_WORDS.get(f, f.replace("_", " ")) for f in d.flags))
        )
    lines += evidence_lines(d)
    lines += window_lines(d.details, d.at_turn)
    # a skipped check's reason is often the fix itself: say it once
    lines += [
        ln
        for ln in store_lines(d.details)
        if not (ln.label == "skipped" and any(ln.value in fix for fix in d.fixes))
    ]
    if d.details.semantic_search is not None:
        lines.append(Line("semantic", d.details.semantic_search, style="dim"))
    lines += [Line("fix", fix) for fix in d.fixes]
    return lines


def window_lines(det: Details, at_turn: int) -> list[Line]:
    """The short-term side: the recorded request or the simulated window, the loss, the
    what-if."""
    lines: list[Line] = []
    seen = det.observed
    if seen is not None:
        size = f"{seen.tokens}" if seen.tokens_exact else f"at least {seen.tokens}"
        text = f"{seen.request} (turn {seen.request_turn}): {size} tokens"
        if seen.reported_prompt_tokens is not None:
            diff = seen.reported_prompt_tokens - seen.tokens
            text += f", the provider reported {seen.reported_prompt_tokens} ({diff:+d})"
        lines.append(Line("request", text))
        if seen.lost_at_turn is not None:
            how = MECHANISM_WORDS.get(seen.mechanism or "", seen.mechanism or "")
            lines.append(Line("lost", f"at turn {seen.lost_at_turn}: {how} (observed)"))
    short = det.short_term
    if short is not None and short.lost_at_turn is not None:
        how = MECHANISM_WORDS.get(short.mechanism or "", short.mechanism or "")
        lines.append(
            Line(
                "lost",
                f"at turn {short.lost_at_turn}: {how} by {short.strategy}, "
                f"budget {short.budget} tokens",
            )
        )
    if short is not None:
        lines.append(
            Line("window", f"{short.window_tokens} of {short.budget} tokens at turn {at_turn}")
        )
    wi = short.what_if if short is not None else (seen.what_if if seen is not None else None)
    if wi is not None:
        keeps = [k for k, v in wi.kept_by_strategy.items() if v]
        loses = [k for k, v in wi.kept_by_strategy.items() if not v]
        at = f" at {seen.what_if_budget} tokens" if seen is not None and short is None else ""
        parts = []
        if keeps:
            parts.append(", ".join(keeps) + (" keeps it" if len(keeps) == 1 else " keep it"))
        if loses:
            parts.append(", ".join(loses) + (" loses it" if len(loses) == 1 else " lose it"))
        text = (f"{at.strip()}: " if at else "") + "; ".join(parts)
        if wi.smallest_sliding_window_budget is not None:
            text += f"; a sliding window keeps it from {wi.smallest_sliding_window_budget} tokens"
        lines.append(Line("what-if", text))
    return lines


def store_lines(det: Details) -> list[Line]:
    """What the long-term checks and the recorded searches saw, in words."""
    lines: list[Line] = []
    rec = det.recorded
    if rec is not None:
        for s in rec.searches:
            got = ", ".join(i for i, _ in s.records[:5]) or "nothing"
            more = f" (+{len(s.records) - 5})" if len(s.records) > 5 else ""
            lines.append(
                Line(
                    "recorded",
                    f"search before {s.before} returned {got}{more}; query:",
                    clip(s.query),
                )
            )
    lt = det.long_term
    if lt is None:
        return lines
    if lt.stores_checked:
        lines.append(Line("checked", "; ".join(lt.stores_checked)))
    ff = lt.facts_file
    if ff is not None:
        if not ff.found:
            lines.append(Line("facts file", "no key holds it"))
        else:
            how = {
                "value": "the value matches",
                "key": "the key matches",
                "key_outdated": "the key holds an outdated value",
            }.get(ff.match, ff.match)
            text = f"{ff.key} = {ff.value!r}: {how}"
            if ff.match == "key_outdated" and ff.updated_at:
                text += f" (updated {ff.updated_at})"
            text += f"; the profile injects {plural(ff.injected_tokens, 'token')}"
            lines.append(Line("facts file", text))
    vs = lt.vector_store
    if vs is not None:
        if vs.found:
            lines.append(Line("vector", f"record {vs.id} in {vs.collection!r} holds it"))
        else:
            lines.append(Line("vector", "no record holds it"))
    r = lt.retrieval
    if r is not None:
        cap = "" if r.max_distance is None else f", distance at most {r.max_distance:g}"
        if r.rank is not None and r.distance is not None:
            text = f"rank {r.rank} of the top {r.top_k}{cap} (distance {r.distance:.3f})"
        else:
            text = f"not in the top {r.top_k}{cap}"
        text += f", {plural(r.searched, 'record')} searched"
        if r.inject_max_tokens is not None:
            text += f"; injection budget {r.inject_max_tokens} tokens"
        lines.append(Line("retrieval", text))
        for c in r.contradicting:
            age = {True: "older", False: "newer", None: "undated"}[c.older]
            lines.append(
                Line("", f"also retrieved at rank {c.rank} ({age}): {c.field} = {c.value!r}")
            )
    ms = lt.memory_store
    if ms is not None:
        if not ms.found:
            lines.append(Line("store", f"no {ms.layout} record holds it"))
        else:
            got = {True: "returns it", False: "does not return it", None: "not known"}[ms.retrieved]
            where = f" (item {ms.rank})" if ms.rank is not None else ""
            lines.append(Line("store", f"record {ms.id} ({ms.layout}) holds it"))
            lines.append(Line("retrieval", f"{ms.retrieved_by}: {got}{where}"))
            for c in ms.contradicting:
                age = {True: "older", False: "newer", None: "undated"}[c.older]
                lines.append(Line("", f"comes with {c.id} ({age}): {c.field} = {c.value!r}"))
    if lt.query is not None and (r is not None or vs is not None):
        lines.append(Line("query", "", clip(lt.query)))
    if lt.skipped_reason is not None:
        lines.append(Line("skipped", lt.skipped_reason))
    return lines


def lines_to_dicts(lines: Sequence[Line]) -> list[dict[str, str]]:
    """The rows for the HTML report's cards (label, value, and quote, style, id when set)."""
    out = []
    for ln in lines:
        row = {"label": ln.label, "value": ln.value}
        row.update(
            {k: v for k, v in (("quote", ln.quote), ("style", ln.style), ("id", ln.id)) if v}
        )
        out.append(row)
    return out
