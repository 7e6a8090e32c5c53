"""Summarizers for the `summary` strategy (docs/reference.md#strategies), behind one registry.

A summarizer turns the previous running summary plus the messages being compressed into a new
summary whose rendered section costs at most ``max_tokens``. **Budget semantics:** the limit
applies to ``counter.section_cost(summary)`` — the summary text rendered as one system message,
chat overhead included — which is exactly what the replay reports in the `summary` section.

- ``extractive`` (default): offline and deterministic; keeps the most informative sentences.
- ``recorded``: never summarizes by itself; the strategy uses the transcript's own summary
  events verbatim (what the agent really had).
- ``llm``: any OpenAI-compatible chat endpoint (``llm_summarizer``); optional, never needed
  by tests.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from memdiag.errors import UsageError
from memdiag.strategies.base import Item
from memdiag.text import CJK, split_sentences_many
from memdiag.tokens import truncate_to_tokens

if TYPE_CHECKING:
    from memdiag.config import LLMSettings
    from memdiag.extract import Extractor
    from memdiag.tokens import TokenCounter

SUMMARY_HEADER = "Summary of earlier conversation:"


class Summarizer(Protocol):
    """Produces a running summary; ``compresses`` is False for one that only replays events."""

    name: str
    compresses: bool

    def summarize(self, previous: str, messages: Sequence[Item], max_tokens: int) -> str:
        """New summary of ``previous`` + ``messages`` ((role, text) pairs, oldest first)."""
        ...

    def shrink(self, summary: str, max_tokens: int) -> str:
        """``summary`` made to cost at most ``max_tokens`` (when the window has no more room)."""
        ...


# --- extractive ------------------------------------------------------------------------------

_FIRST_PERSON = re.compile(
    r"(?:\b(?:I|I'm|I’m|I've|I’ve|I'd|I’d|my|My|me|mine|we|We|our|Our)\b|我)"
)
# searched in the casefolded sentence: a case-sensitive pattern is measured ~3× faster than
# re.IGNORECASE here
_CONSTRAINT = re.compile(
    r"\b(?:never|always|don't|don’t|do not|must|mustn't|cannot|can't|avoid|allergic|allergy|"
    r"required?|only|no longer)\b|不要|别|必须|总是|从不|过敏|不能|禁止|千万|一定|只"
)
_NUMBER = re.compile(r"\d")
# whether a sentence holds a date (only that is asked, never where): "3月", "十二日" hold one
# exactly when a numeral stands right before 月/日/号, so the last alternative asks for one
# numeral, not a run (``[…]+[月日号]`` tried every start inside a run of digits to its end:
# quadratic, hours for a tool output of a million digits; a property test holds both equal)
_DATE = re.compile(
    r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+\d|\b\d{4}-\d{2}-\d{2}\b|"
    r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b|[0-9一二三四五六七八九十][月日号]"
)
_DATE_HINT = re.compile("[月日号]")
# The same searches for scanning many sentences at once: a leading class of every character a
# match can start with lets the regex engine skip ahead instead of trying each position (~3×
# faster here); whether a text has a match is unchanged (a property test holds them equal).
_DATE_SCAN = re.compile(rf"(?=[\dJFMASONDTW一二三四五六七八九十])(?:{_DATE.pattern})")
_CONSTRAINT_SCAN = re.compile(rf"(?=[nadmcro不别必总从过禁千一只])(?:{_CONSTRAINT.pattern})")
_FIRST_PERSON_SCAN = re.compile(rf"(?=[IMmWwOo我])(?:{_FIRST_PERSON.pattern})")
_CAPITALIZED_SCAN = re.compile(r"[\s,(][A-Z][a-z]+")
_CAPITALIZED = re.compile(r"(?<=[\s,(])[A-Z][a-z]+")
_LINE_ROLES = frozenset({"user", "assistant", "tool", "system", "summary"})
_LINE = re.compile(rf"^({'|'.join(sorted(_LINE_ROLES))}): (.*)$")
MIN_WORDS = 3  # "Thanks!" and "Sounds good." carry nothing worth keeping
MIN_CJK_CHARS = 4
EXACT_RETRIES = 4
# encodings whose pre-tokenization always ends a piece at a newline followed by a letter
# (lines left out by the estimate are re-tried with an exact count)
ADDITIVE_ENCODINGS = frozenset({"o200k_base", "cl100k_base"})


# A line that may be kept: (-score, -order, tokens, "role: text", role, text); sorted, the
# tuples rank (higher score, then more recent: ``order`` is a line's unique chronological
# place, previous summary lines first); ``tokens``: the line's estimated cost with newline.
_Candidate = tuple[int, int, int, str, str, str]
# (role, text, key, tokens per character of its message; None: count the line exactly)
_Line = tuple[str, str, str, float | None]
_ORDER = operator.itemgetter(1)  # -order: sorted in reverse, the oldest line first


# Joins sentences for one scan per pattern: no feature pattern can match NUL or cross it, and
# before/after a sentence it behaves as the string's edge does (not a word character, not
# whitespace), so a match inside a sentence's span is exactly a match in the sentence alone.
_SEP = "\0"


def _hits(pattern: re.Pattern[str], joined: str, starts: list[int]) -> bytearray:
    """Which of the NUL-joined texts (starting at ``starts``) ``pattern`` finds something in.

    One ``search`` per text that has a match (plus one): after a hit the scan jumps to the
    next text, so a digit-heavy text costs no more than a text with one digit.
    """
    out = bytearray(len(starts))
    last = len(starts) - 1
    search = pattern.search
    pos = 0
    while True:
        m = search(joined, pos)
        if m is None:
            return out
        n = bisect.bisect_right(starts, m.start()) - 1
        out[n] = 1
        if n == last:
            return out
        pos = starts[n + 1]


def _joined(texts: list[str]) -> tuple[str, list[int]]:
    starts = list(itertools.accumulate((len(t) + 1 for t in texts[:-1]), initial=0))
    return _SEP.join(texts), starts


def _base(
    extracted: bool,
    strong: bool,
    constraint: bool,
    first_person: bool,
    number: bool,
    date: bool,
    capitalized: bool,
) -> int:
    """A sentence's score before its role's share: the features of ExtractiveSummarizer."""
    return (
        (4 + (3 if strong else 0) if extracted else 0)
        + (3 if constraint else 0)
        + (2 if first_person else 0)
        + number
        + date
        + capitalized
    )


def _for_role(role: str, base: int) -> int:
    """The role's share: a user's sentence that scores +1; a tool's -2 (never below 0)."""
    if base and role == "user":
        return base + 1
    if role == "tool":
        return max(0, base - 2)  # raw tool output is rarely what a user asks about later
    return base


class ExtractiveSummarizer:
    """Keeps the highest-scoring sentences, in chronological order, within the budget.

    Score: an extractor match (+4, strong +3 more), a constraint word (+3), first person (+2),
    a user sentence (+1), numbers (+1), dates (+1), capitalised names (+1). Ties go to the more
    recent sentence. Sentences scoring 0, and very short ones, are never kept. One call costs
    O(previous summary + new messages): both are split once, the sentences not seen before
    are scored together (one scan per pattern over all of them), and selected once.
    """

    name = "extractive"
    compresses = True

    def __init__(self, counter: TokenCounter, extractor: Extractor | None = None) -> None:
        from memdiag.extract import default_extractor

        self.counter = counter
        self.extractor = extractor or default_extractor()
        # A sentence is split, extracted and scored once per run, however many summaries carry
        # it (docs/engine.md): its score by "role: sentence" (``scores``, which the strategy
        # may share between the replays of a run; every sentence of the run, a few MB for 100k
        # sentences), and its (score, estimated tokens) in ``_lines``.
        self.scores: dict[str, int] = {}
        self._known: dict[str, int] = {}  # each sentence's score before its role's share
        self._lines: dict[str, tuple[int, int]] = {}
        self._roles: dict[str, int] = {}
        # exact counts of summary lines with their newline, and alone (only of the lines that
        # were ever the newest of a summary, the one without a newline); see _exact_cost
        self._exact: dict[str, int] = {}
        self._alone: dict[str, int] = {}
        # the lines of the summary this summarizer wrote last: the next call starts from it
        self._written: tuple[str, list[_Line]] = ("", [])
        self._additive = counter.encoding_name in ADDITIVE_ENCODINGS
        self._header_cost = counter.message_cost("system", "") + counter.count(
            SUMMARY_HEADER + "\n"
        )

    def score(self, role: str, sentence: str) -> int:
        """How informative one sentence is (0: not worth keeping). ``score_many`` for many."""
        cjk = 0 if sentence.isascii() else len(CJK.findall(sentence))
        if cjk < MIN_CJK_CHARS and len(sentence.split()) < MIN_WORDS:
            return 0
        found = self.extractor.extract(sentence)
        has_number = _NUMBER.search(sentence) is not None
        return _for_role(
            role,
            _base(
                bool(found),
                any(e.strong for e in found),
                _CONSTRAINT.search(sentence.casefold()) is not None,
                _FIRST_PERSON.search(sentence) is not None,
                has_number,
                # every date form needs a digit, a weekday ("…day") or 月/日/号: skip the slow
                # regex
                (has_number or "day" in sentence or _DATE_HINT.search(sentence) is not None)
                and _DATE.search(sentence) is not None,
                _CAPITALIZED.search(sentence) is not None,
            ),
        )

    def score_many(self, items: Sequence[tuple[str, str]]) -> list[int]:
        """``score`` of every (role, sentence). What a sentence holds is the same whoever
        said it, so each sentence is read once per run (``_bases``, one scan per pattern over
        all the new ones) and only the role's share is added per item."""
        known = self._known
        new = {s: None for _, s in items if s not in known and _SEP not in s}
        if new:
            known.update(zip(new, self._bases(list(new)), strict=True))
        return [
            self.score(role, sentence) if _SEP in sentence else _for_role(role, known[sentence])
            for role, sentence in items
        ]

    def _bases(self, sentences: list[str]) -> list[int]:
        """The score of each sentence before its role's share (0: too short to keep)."""
        bases = [0] * len(sentences)
        worth = [  # long enough to score
            n
            for n, sentence in enumerate(sentences)
            if len(sentence.split()) >= MIN_WORDS
            or (not sentence.isascii() and len(CJK.findall(sentence)) >= MIN_CJK_CHARS)
        ]
        if not worth:
            return bases
        texts = [sentences[n] for n in worth]
        joined, starts = _joined(texts)
        folded, folded_starts = _joined([t.casefold() for t in texts])
        first_person = _hits(_FIRST_PERSON_SCAN, joined, starts)
        number = _hits(_NUMBER, joined, starts)
        date = _hits(_DATE_SCAN, joined, starts)
        capitalized = _hits(_CAPITALIZED_SCAN, joined, starts)
        constraint = _hits(_CONSTRAINT_SCAN, folded, folded_starts)
        extracted = self.extractor.extract_many(texts)
        for k, n in enumerate(worth):
            found = extracted[k]
            bases[n] = _base(
                bool(found),
                any(e.strong for e in found),
                constraint[k] == 1,
                first_person[k] == 1,
                number[k] == 1,
                date[k] == 1,
                capitalized[k] == 1,
            )
        return bases

    def _measure(self, role: str, text: str, key: str, per_char: float | None) -> tuple[int, int]:
        """(score, estimated tokens) of a line ``_lines`` does not hold, kept there."""
        lines = self._lines
        if len(lines) > 4096:
            # the first estimate of a line stands until this clear: kept as it was, since
            # the estimates steer which lines are tried (outputs stay byte-identical); the
            # score, the costly part, is kept for the whole run in ``scores``
            lines.clear()
        score = self.scores[key]
        if score <= 0:
            lines[key] = (score, 0)
        elif per_char is not None:
            cost = self._roles.get(role)  # "\n" + "role: ": the same for every line of a role
            if cost is None:
                cost = self._roles[role] = self.counter.count(f"\n{role}: ")
            lines[key] = (score, max(1, round(per_char * len(text))) + cost)
        else:
            lines[key] = (score, self.counter.count("\n" + key))
        return lines[key]

    def summarize(self, previous: str, messages: Sequence[Item], max_tokens: int) -> str:
        """Select sentences of ``previous`` + ``messages`` within ``max_tokens``.

        A message may carry its token count as a third element: sentence costs are then
        estimated in proportion to their length instead of encoding every sentence again
        (the choice is still checked with an exact count of the rendered summary).
        """
        lines = list(self._previous_lines(previous))  # every line and sentence, in order
        scores = self.scores  # the sentences not scored yet are found as the lines are made
        fresh = {key: (role, text) for role, text, key, _ in lines if key not in scores}
        split = split_sentences_many([item[1] for item in messages])
        for item, sentences in zip(messages, split, strict=True):
            role, text = item[0], item[1]
            hint = item[2] if len(item) > 2 else None
            per_char = hint / len(text) if hint and text else None
            prefix = role + ": "
            for sentence in sentences:
                key = prefix + sentence
                lines.append((role, sentence, key, per_char))
                if key not in scores:
                    fresh[key] = (role, sentence)
        if fresh:
            scores.update(zip(fresh, self.score_many(list(fresh.values())), strict=True))
        candidates: list[_Candidate] = []
        seen: set[str] = set()
        known = self._lines.get
        order = 0
        for role, text, key, per_char in lines:
            order += 1
            if key in seen:
                continue
            measured = known(key) or self._measure(role, text, key, per_char)
            if measured[0] <= 0:
                continue
            seen.add(key)
            candidates.append((-measured[0], -order, measured[1], key, role, text))
        return self._select(candidates, max_tokens)

    def _previous_lines(self, previous: str) -> list[_Line]:
        """(role, text, key, None) of each line of ``previous`` (parsed once when it is ours)."""
        written, parsed = self._written
        if previous == written and written:
            return parsed
        lines: list[_Line] = []
        for line in previous.splitlines():
            if not line or line == SUMMARY_HEADER:
                continue
            m = _LINE.match(line)
            role, text = (m.group(1), m.group(2)) if m else ("summary", line)
            lines.append((role, text, f"{role}: {text}", None))
        return lines

    def shrink(self, summary: str, max_tokens: int) -> str:
        # re-selecting keeps the most informative lines rather than cutting the newest ones
        return self.summarize(summary, (), max_tokens)

    def _select(self, candidates: list[_Candidate], max_tokens: int) -> str:
        base = self.counter.section_cost(SUMMARY_HEADER)
        if not candidates or base >= max_tokens:
            return ""
        ranked = sorted(candidates)  # higher score first, then the more recent
        chosen: list[_Candidate] = []
        used = base
        for c in ranked:
            if used + c[2] <= max_tokens:
                chosen.append(c)
                used += c[2]
        # per-line counts are an estimate (BPE may merge across a line end, ":\n" is one
        # token): trim to the exact count, then try a few of the lines left out that the
        # exact count says may still fit
        cost = self._exact_cost(chosen)
        while chosen and cost > max_tokens:
            chosen.pop()  # the lowest-ranked line
            cost = self._exact_cost(chosen)
        picked = {c[1] for c in chosen}
        newest = min(chosen, key=_ORDER) if chosen else None  # -order: the smallest is newest
        tries = 0
        for c in ranked:
            if tries == EXACT_RETRIES:
                break
            if c[1] in picked or (cost or base) + c[2] > max_tokens + 1:
                continue
            tries += 1
            longer_cost = self._exact_cost_with(chosen, cost, newest, c)
            if longer_cost <= max_tokens:
                chosen.append(c)
                picked.add(c[1])
                cost = longer_cost
                if newest is None or c[1] < newest[1]:
                    newest = c
        if not chosen:
            return ""
        ordered = sorted(chosen, key=_ORDER, reverse=True)  # oldest first
        text = self._render(ordered)
        self.counter.remember_section(text, cost)
        if all(c[4] in _LINE_ROLES for c in ordered):  # lines that parse back as written
            self._written = (text, [(c[4], c[5], c[3], None) for c in ordered])
        return text

    def _exact_cost(self, chosen: list[_Candidate]) -> int:
        """``counter.section_cost(self._render(chosen))``, without encoding the summary again.

        With the bundled encodings a line's newline always ends a pre-tokenization piece (the
        next line starts with a role name, and no piece runs from a newline into a letter),
        so the rendered summary costs the header + newline, each line + newline, and the last
        line alone: each line is encoded once, however often it is re-selected. A property
        test holds this equal to encoding the whole text. Other encodings encode it whole.
        """
        if not chosen:
            return 0
        if not self._additive:
            return self.counter.section_cost(self._render(sorted(chosen, key=_ORDER, reverse=True)))
        counts = self._exact
        encode = self.counter.ordinary  # = counter.count (no special tokens)
        total = self._header_cost
        newest = chosen[0]
        for c in chosen:
            key = c[3]
            known = counts.get(key)
            if known is None:
                known = counts[key] = len(encode(key + "\n"))
            total += known
            if c[1] < newest[1]:  # -order: the smaller, the newer
                newest = c
        key = newest[3]  # the newest line has no newline after it
        return total - counts[key] + self._alone_count(key)

    def _exact_cost_with(
        self, chosen: list[_Candidate], cost: int, newest: _Candidate | None, c: _Candidate
    ) -> int:
        """``_exact_cost([*chosen, c])`` from ``cost``, the exact cost of ``chosen``, and its
        newest line: ``c``'s line with its newline is added, and when ``c`` is newer, the
        newest line before it gets its newline back (a property test holds them equal)."""
        if newest is None or not self._additive:  # None: nothing chosen yet
            return self._exact_cost([*chosen, c])
        key = c[3]
        with_newline = self._exact.get(key)
        if with_newline is None:
            with_newline = self._exact[key] = len(self.counter.ordinary(key + "\n"))
        if c[1] > newest[1]:  # older than the newest line: it ends with a newline
            return cost + with_newline
        before = newest[3]
        return cost + self._exact[before] - self._alone_count(before) + self._alone_count(key)

    def _alone_count(self, key: str) -> int:
        """Exact tokens of a summary line without its newline (the newest line's), kept."""
        found = self._alone.get(key)
        if found is None:
            found = self._alone[key] = len(self.counter.ordinary(key))
        return found

    @staticmethod
    def _render(ordered: list[_Candidate]) -> str:
        """The summary text of lines in chronological order."""
        return "\n".join([SUMMARY_HEADER, *(c[3] for c in ordered)])


# --- recorded --------------------------------------------------------------------------------


class RecordedSummarizer:
    """The transcript's own summary events; the strategy applies them, this never compresses."""

    name = "recorded"
    compresses = False

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def summarize(self, previous: str, messages: Sequence[Item], max_tokens: int) -> str:
        return previous

    def shrink(self, summary: str, max_tokens: int) -> str:
        return truncate_to_tokens(self.counter, summary, max_tokens)


SummarizerFactory = Callable[["TokenCounter", "LLMSettings", "Extractor | None"], Summarizer]


def _extractive(counter: TokenCounter, llm: LLMSettings, extractor: Extractor | None) -> Summarizer:
    return ExtractiveSummarizer(counter, extractor)


def _recorded(counter: TokenCounter, llm: LLMSettings, extractor: Extractor | None) -> Summarizer:
    return RecordedSummarizer(counter)


def _llm(counter: TokenCounter, llm: LLMSettings, extractor: Extractor | None) -> Summarizer:
    from memdiag.strategies.llm_summarizer import LLMSummarizer  # urllib only when asked for

    return LLMSummarizer(counter, llm)


SUMMARIZERS: dict[str, SummarizerFactory] = {
    "extractive": _extractive,
    "recorded": _recorded,
    "llm": _llm,
}


def check_summarizer(name: str) -> SummarizerFactory:
    """The registry's factory for ``name``; UsageError for an unknown name."""
    try:
        return SUMMARIZERS[name]
    except KeyError:
        raise UsageError(
            f"unknown summarizer {name!r}; choose one of: {', '.join(SUMMARIZERS)}"
        ) from None


def make_summarizer(
    name: str, counter: TokenCounter, llm: LLMSettings, extractor: Extractor | None = None
) -> Summarizer:
    """The summarizer ``name`` from the registry; UsageError for an unknown name."""
    return check_summarizer(name)(counter, llm, extractor)
