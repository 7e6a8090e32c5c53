"""Findings of a facts file on its own: colliding keys, repeated keys, history, age."""

from __future__ import annotations

from datetime import datetime, timedelta

from memdiag.stores.audit.claims import Claim, cluster_values
from memdiag.stores.audit.common import fact_id, fmt_time, unique_ids
from memdiag.stores.audit.report import Finding
from memdiag.stores.facts_file import FactsFile
from memdiag.text import same_value


def collision_conflicts(facts: FactsFile) -> list[Finding]:
    """conflict: keys that normalize alike (``User Name``, ``user_name``) with different values."""
    findings: list[Finding] = []
    for col in facts.normalization_collisions:
        entries = [e for e in facts.entries if e.normalized_key == col.normalized_key]
        claims = [Claim(0, col.normalized_key, e.value, False, False, None) for e in entries]
        if len(cluster_values(claims)) > 1:
            shown = "; ".join(f"{e.key!r} = {e.value!r}" for e in entries)
            findings.append(
                Finding(
                    "conflict",
                    "error",
                    unique_ids(fact_id(e) for e in entries),
                    f"facts file keys normalize to {col.normalized_key!r} but disagree: {shown}; "
                    "an exact-key reader gets whichever spelling it asks for",
                )
            )
    return findings


def history_findings(facts: FactsFile) -> list[Finding]:
    """Older values of a key: a conflict in a JSON object (a repeated key), else info-level
    stale history of a records file, which readers skip."""
    findings: list[Finding] = []
    for key, history in facts.history.items():
        current = facts.lookup(key)
        older = [e for e in history if e is not current]
        differing = [e for e in older if current is None or not same_value(e.value, current.value)]
        if not differing or current is None:
            continue
        if facts.shape != "records":
            # A JSON object with a repeated key: parsers disagree on which one wins.
            findings.append(
                Finding(
                    "conflict",
                    "error",
                    unique_ids([fact_id(current)] + [fact_id(e, False) for e in differing]),
                    f"facts file repeats key {key!r} with different values "
                    f"({', '.join(repr(e.value) for e in [*differing, current])}); JSON readers "
                    "keep the last one, others may not",
                )
            )
            continue
        for e in differing:
            findings.append(
                Finding(
                    "stale",
                    "info",
                    (fact_id(e, False), fact_id(current)),
                    f"facts file: {key} = {e.value!r} ({fmt_time(e.timestamp)}, "
                    f"line {e.line}) was "
                    f"superseded by {current.value!r} ({fmt_time(current.timestamp)}); kept as "
                    "history, readers use the current value",
                )
            )
    return findings


def aged_facts(facts: FactsFile, stale_after_days: float | None, now: datetime) -> list[Finding]:
    """stale: current values not updated for more than ``stale_after_days`` (None: never)."""
    if stale_after_days is None:
        return []
    limit = now - timedelta(days=stale_after_days)
    old = [e for e in facts.entries if e.timestamp is not None and e.timestamp < limit]
    if not old:
        return []
    return [
        Finding(
            "stale",
            "warning",
            unique_ids(fact_id(e) for e in old),
            f"{len(old)} facts file value(s) not updated for more than "
            f"{stale_after_days:g} days: "
            + ", ".join(f"{e.key} ({fmt_time(e.timestamp)})" for e in old[:10]),
        )
    ]


def facts_file_findings(
    facts: FactsFile, stale_after_days: float | None, now: datetime
) -> list[Finding]:
    """Every finding of the facts file alone, in report order."""
    return [
        *collision_conflicts(facts),
        *history_findings(facts),
        *aged_facts(facts, stale_after_days, now),
    ]
