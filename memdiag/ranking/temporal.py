"""Time in evidence search: a fact's dates against the dates of the sessions
(docs/reference.md#verdicts step 1).

A memory says "Caroline went to a support group on 7 May 2023"; the conversation said "I went
to a support group yesterday" in a session held on 8 May 2023. Neither words nor embeddings
connect the two; dates do. A fact's dates ("7 May 2023", "in May 2023", "2022", "the week
before 9 June 2023") become day intervals; each message gets the interval of its session date
and those of the relative words it uses ("yesterday", "last Saturday", "next month", "last
year"), resolved against that date. A message whose own words point into the fact's interval
scores 1, a message merely said during it 0.5.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from functools import lru_cache

Interval = tuple[dt.date, dt.date]

MONTHS = {
    m: k + 1
    for k, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}
WEEKDAYS = {
    d: k
    for k, names in enumerate(
        [
            ("monday",),
            ("tuesday",),
            ("wednesday",),
            ("thursday",),
            ("friday",),
            ("saturday",),
            ("sunday",),
        ]
    )
    for d in names
}
_MONTH = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = "(" + "|".join(WEEKDAYS) + ")"
_YEAR = r"((?:19|20)\d\d)"

_ISO = re.compile(r"\b((?:19|20)\d\d)[-/](\d{1,2})[-/](\d{1,2})(?!\d)")  # 2026-04-02T08:30
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b")
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+{_YEAR}\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b")
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b")
_BARE_YEAR = re.compile(rf"\b{_YEAR}\b")
_BEFORE = re.compile(r"\b(before|prior to|earlier than)\s*$")
_AFTER = re.compile(r"\b(after|following)\s*$")
_WEEK_OF = re.compile(r"\bweek of\s*$")

_DAY = dt.timedelta(days=1)


def _month_interval(year: int, month: int) -> Interval:
    start = dt.date(year, month, 1)
    nxt = dt.date(year + (month == 12), month % 12 + 1, 1)
    return start, nxt - _DAY


def _safe_date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def parse_date(text: str | None) -> dt.date | None:
    """The first calendar date in a timestamp ("1:56 pm on 8 May, 2023", "2023/05/20 (Sat)")."""
    if not text:
        return None
    low = text.casefold()
    for pattern, order in ((_ISO, "ymd"), (_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        m = pattern.search(low)
        if m is None:
            continue
        g = m.groups()
        if order == "ymd":
            return _safe_date(int(g[0]), int(g[1]), int(g[2]))
        if order == "dmy":
            return _safe_date(int(g[2]), MONTHS[g[1]], int(g[0]))
        return _safe_date(int(g[2]), MONTHS[g[0]], int(g[1]))
    return None


def _widen(low: str, start: int, span: Interval) -> Interval:
    """Apply "the week before" / "after" / "the week of" that precede a date in the fact."""
    head = low[max(0, start - 40) : start]
    lo, hi = span
    if _BEFORE.search(head):
        return lo - dt.timedelta(days=15), lo
    if _AFTER.search(head):
        return hi, hi + dt.timedelta(days=15)
    if _WEEK_OF.search(head):
        return lo - dt.timedelta(days=3), hi + dt.timedelta(days=3)
    return span


@lru_cache(maxsize=4096)
def fact_intervals(fact: str) -> tuple[Interval, ...]:
    """Day intervals that the dates written in ``fact`` name (empty: the fact names no date)."""
    low = fact.casefold()
    out: list[Interval] = []
    taken: list[tuple[int, int]] = []

    def free(m: re.Match[str]) -> bool:
        return all(m.end() <= a or m.start() >= b for a, b in taken)

    for m in _ISO.finditer(low):
        d = _safe_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if d:
            out.append(_widen(low, m.start(), (d, d)))
            taken.append(m.span())
    for m in _DAY_MONTH_YEAR.finditer(low):
        d = _safe_date(int(m.group(3)), MONTHS[m.group(2)], int(m.group(1)))
        if d and free(m):
            out.append(_widen(low, m.start(), (d, d)))
            taken.append(m.span())
    for m in _MONTH_DAY_YEAR.finditer(low):
        d = _safe_date(int(m.group(3)), MONTHS[m.group(1)], int(m.group(2)))
        if d and free(m):
            out.append(_widen(low, m.start(), (d, d)))
            taken.append(m.span())
    for m in _MONTH_YEAR.finditer(low):
        if free(m):
            out.append(_widen(low, m.start(), _month_interval(int(m.group(2)), MONTHS[m.group(1)])))
            taken.append(m.span())
    for m in _BARE_YEAR.finditer(low):
        if free(m):
            y = int(m.group(1))
            out.append((dt.date(y, 1, 1), dt.date(y, 12, 31)))
            taken.append(m.span())
    return tuple(out)


_RELATIVE = re.compile(
    r"\b(yesterday|last night|today|tonight|this morning|this afternoon|tomorrow"
    r"|the other day|a few days ago|(?:last|this past|past) weekend|(?:last|past) week"
    r"|this week|next week|this weekend|(?:last|this past) "
    + _WEEKDAY
    + r"|on "
    + _WEEKDAY
    + r"|last month|this month|next month|last year|this year|next year"
    r"|(\d+|a|one|two|three|four|five|six|seven|eight|nine|ten) years? ago"
    r"|in " + _MONTH + r")\b"
)
_NUMBERS = {
    "a": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}


def _previous_weekday(day: dt.date, weekday: int) -> dt.date:
    back = (day.weekday() - weekday) % 7 or 7
    return day - dt.timedelta(days=back)


def _resolve(phrase: str, groups: tuple[str | None, ...], when: dt.date) -> Interval | None:
    days = dt.timedelta
    if phrase in ("yesterday", "last night"):
        return when - _DAY, when - _DAY
    if phrase in ("today", "tonight", "this morning", "this afternoon"):
        return when, when
    if phrase == "tomorrow":
        return when + _DAY, when + _DAY
    if phrase in ("the other day", "a few days ago"):
        return when - days(7), when - _DAY
    if phrase.endswith("weekend"):
        if phrase.startswith("this weekend"):
            return when, when + days(7)
        return when - days(9), when - _DAY
    if phrase in ("last week", "past week"):
        return when - days(14), when - _DAY
    if phrase == "this week":
        return when - days(6), when + days(6)
    if phrase == "next week":
        return when + _DAY, when + days(14)
    weekday = groups[0] or groups[1]
    if weekday:
        d = _previous_weekday(when, WEEKDAYS[weekday])
        return d, d
    if phrase.endswith("month"):
        shift = {"last": -1, "this": 0, "next": 1}[phrase.split()[0]]
        k = when.year * 12 + when.month - 1 + shift
        return _month_interval(k // 12, k % 12 + 1)
    if phrase.endswith("year"):
        y = when.year + {"last": -1, "this": 0, "next": 1}[phrase.split()[0]]
        return dt.date(y, 1, 1), dt.date(y, 12, 31)
    if phrase.endswith("ago"):
        n = groups[2] or "1"
        y = when.year - (int(n) if n.isdigit() else _NUMBERS.get(n, 1))
        return dt.date(y, 1, 1), dt.date(y, 12, 31)
    month = groups[3]
    if month:  # "in June": this year's, or next year's when June has passed
        y = when.year + (MONTHS[month] < when.month)
        return _month_interval(y, MONTHS[month])
    return None


def text_intervals(text: str, when: dt.date | None) -> tuple[Interval, ...]:
    """Intervals that ``text`` points at: its own dates, and relative words resolved at ``when``."""
    out = list(fact_intervals(text))
    if when is not None:
        for m in _RELATIVE.finditer(text.casefold()):
            span = _resolve(m.group(1), m.groups()[1:], when)
            if span is not None:
                out.append(span)
    return tuple(out)


def _overlaps(a: Interval, b: Interval) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def temporal_score(
    wanted: Iterable[Interval], said: Iterable[Interval], when: dt.date | None
) -> float:
    """1.0: the message's words point into a wanted interval; 0.5: it was said during one
    (or within the week after it); 0.0 otherwise."""
    wanted = tuple(wanted)
    if any(_overlaps(w, s) for w in wanted for s in said):
        return 1.0
    if when is not None and any(w[0] <= when <= w[1] + dt.timedelta(days=7) for w in wanted):
        return 0.5
    return 0.0
