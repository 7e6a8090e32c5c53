"""Rule-based extraction of key entities (name, allergy, time zone, …) from text
(docs/reference.md#concepts, §4).

Rules are data (``memdiag/data/rules.yaml``, plus an optional user file with the same format):
each names a field and regexes whose named group ``value`` captures the value. The scratchpad
strategy pins what they find; ``strong_facts`` finds the docs/reference.md#concepts strong facts a
replay tracks
when the user gives no ``--fact``. Precision matters more than recall here: a wrong pin costs
window tokens and misleads the diagnosis, a missed one only leaves the fact to the window.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from memdiag.errors import InputError
from memdiag.fields import (
    CATEGORY_KEYS,
    FIELD_SYNONYMS,
    SUBJECT_KEYS,
    VALUE_KEYS,
    field_for_key,
    first_text,
)
from memdiag.subjects import entity_person, unlabel
from memdiag.text import (
    LazyPattern,
    as_first_person,
    has_cjk,
    mask_non_statements,
    negated_before,
)

BUILTIN_RULES = "rules.yaml"
NORMALIZERS = ("none", "lower", "first_lower", "rule", "timezone", "units")
MAX_VALUE_CHARS = 80  # a longer capture is a run-on sentence, not a value

# a value ends at a new clause ("peanuts, so no satay" → "peanuts"); docs/engine.md, "Long runs"
_RUN_START = r"(?!(?<=\s)\s)"  # where a whitespace run begins (taken whole after it)
_CLAUSE_HEAD = (  # clause words, or the whitespace before the punctuation each pattern adds
    _RUN_START + r"\s++(?:but|so|because|since|though|although|which|who|when|if|while|unless|"
    r"until|except|as well|too|also|anymore|any more|please|thanks|thank you|"
    r"and (?:I|I'm|my|we|you|it|that|so|also|please|then)|or (?:I|my|we|you|so))\b.*$"
    r"|(?:但是|但|因为|所以|而且|可是|不过).*$|" + _RUN_START + r"\s*+"
)
_CLAUSE = re.compile(_CLAUSE_HEAD + r"[,，。；;:：!！?？(（].*$", re.I | re.S)
_CLAUSE_LIST = re.compile(_CLAUSE_HEAD + r"[。；;:：!！?？(（].*$", re.I | re.S)  # commas: items
_SPLIT = re.compile(
    _RUN_START + r"\s*+(?:,\s*(?:and|or)\s+|,|，|、|\band\b|\bor\b|&|\bplus\b|和|以及|及|跟|与)\s*"
)
_EDGE = re.compile(r"^[\s\"'“”‘’«»「」『』]+|[\s\"'“”‘’«»「」『』.,;:!?。，；：！？、…]+$")
_ARTICLE = re.compile(r"^(?:the|a|an|some|any)\s+", re.IGNORECASE)
_CJK_TAIL = re.compile(r"[了的啊呢吧呀哦喔嘛]+$")
_CN_DIGITS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


@dataclass(frozen=True)
class FieldSpec:
    """How the scratchpad keeps a field (the ``fields:`` table of a rules file)."""

    strong: bool = False
    multi: bool = False  # values accumulate instead of overwriting
    label: str | None = None  # pinned line label; default: the field name
    label_zh: str | None = None  # label when the value is Chinese/Japanese/Korean
    # how a Chinese value reads on its line ("{value}过敏": "过敏: 花生过敏"), so that the
    # pinned text states the fact the way people say it
    value_zh: str | None = None


@dataclass(frozen=True)
class Rule:
    """One statement shape: regexes with a named group ``value`` (or a fixed ``value``)."""

    id: str
    field: str
    patterns: list[str]
    strong: bool | None = None  # None: the field's default
    multi: bool | None = None  # None: the field's default
    value: str | None = None  # fixed value when the pattern has no `value` group
    split: bool = False  # "peanuts and shellfish" → two values
    normalize: str = "none"  # lower | first_lower | timezone | units | none
    # prefilter: lowercase substrings
    keywords: list[str] = dataclasses.field(default_factory=list)
    trim_clauses: bool = True  # cut the value at clause words and commas
    ignore_case: bool = False


@dataclass(frozen=True)
class RulesFile:
    version: int = 1
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    rules: list[Rule] = dataclasses.field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Extraction:
    """One value found in a text."""

    field: str  # name, location, timezone, allergy, diet, preference, prohibition, ...
    value: str  # normalized value, e.g. "peanuts", "Mia", "UTC+8", "metric"
    strong: bool  # docs/reference.md#concepts strong fact
    span: tuple[int, int]  # of the value in the text (of the whole list for split values)
    rule: str  # rule id


@dataclass(frozen=True)
class _Compiled:
    rule: Rule
    strong: bool
    regexes: tuple[LazyPattern, ...]  # compiled when a keyword first wakes the rule
    keywords: tuple[str, ...]


class Extractor:
    """Runs rules over texts. Deterministic: results are ordered by position, then rule order."""

    def __init__(self, rules: list[Rule], fields: dict[str, FieldSpec] | None = None) -> None:
        self.fields: dict[str, FieldSpec] = dict(fields or {})
        self.rules = list(rules)
        compiled = []
        for rule in self.rules:
            spec = self.fields.get(rule.field, FieldSpec())
            flags = re.IGNORECASE if rule.ignore_case else 0
            compiled.append(
                _Compiled(
                    rule,
                    spec.strong if rule.strong is None else rule.strong,
                    tuple(LazyPattern(p, flags) for p in rule.patterns),
                    tuple(k.casefold() for k in rule.keywords),
                )
            )
        self._compiled = tuple(compiled)
        # each distinct keyword is tested once per text with `in`: measured ~3× faster than
        # one regex alternation over all of them (~100 keywords, sentence-length texts)
        words = sorted({k for c in compiled for k in c.keywords})
        self._keywords = tuple(words)
        self._ascii_keywords = tuple(k for k in words if k.isascii())
        self._nul_keyword = any("\0" in k for k in words)
        # which rules each keyword wakes up; rules without keywords always run
        self._always = tuple(n for n, c in enumerate(compiled) if not c.keywords)
        self._woken: dict[str, tuple[int, ...]] = {
            k: tuple(n for n, c in enumerate(compiled) if k in c.keywords) for k in words
        }
        multi = {f for f, s in self.fields.items() if s.multi}
        for rule in self.rules:  # a rule may make its field multi-valued (user rules)
            if rule.multi is not None:
                (multi.add if rule.multi else multi.discard)(rule.field)
        self.multi_fields: frozenset[str] = frozenset(multi)
        self._memo: dict[str, list[Extraction]] | None = None

    def memoized(self) -> Extractor:
        """This extractor with a memo of ``extract`` by text: one run reads each distinct text
        once, whichever strategy or replay asks (docs/engine.md). Same answers."""
        twin = copy.copy(self)
        twin._memo = {}
        return twin

    def is_multi(self, field_name: str) -> bool:
        """Whether values of ``field_name`` accumulate rather than overwrite."""
        return field_name in self.multi_fields

    def is_strong(self, field_name: str) -> bool:
        """The field's default strength (a rule may still mark its own matches strong)."""
        return self.fields.get(field_name, FieldSpec()).strong

    def label(self, field_name: str, value: str) -> str:
        """The label of a pinned line: Chinese when the value is, else English."""
        spec = self.fields.get(field_name, FieldSpec())
        if spec.label_zh and has_cjk(value):
            return spec.label_zh
        return spec.label or field_name

    def render_value(self, field_name: str, value: str) -> str:
        """A value as it reads on its pinned line."""
        spec = self.fields.get(field_name, FieldSpec())
        if spec.value_zh and has_cjk(value):
            return spec.value_zh.replace("{value}", value)
        return value

    def stated(self, text: str, single_only: bool = False) -> dict[str, str]:
        """Field → casefolded value stated in ``text`` (the last: a later statement wins).

        ``single_only`` keeps fields that hold one value at a time, where two different
        values contradict each other (a location, not an allergy).
        """
        out: dict[str, str] = {}
        for x in self.extract(text):
            if not (single_only and self.is_multi(x.field)):
                out[x.field] = x.value.casefold()
        return out

    def could_match(self, text: str) -> bool:
        """False when no rule can match ``text`` (none of their keywords occurs in it)."""
        if self._always:
            return True
        folded = text.casefold()
        for k in self._keywords:  # noqa: SIM110 - a plain loop measured faster than any()
            if k in folded:
                return True
        return False

    def could_match_each(self, texts: Sequence[str]) -> list[bool]:
        """``could_match`` of every text, from one scan per keyword over all of them."""
        if self._always or not texts:
            return [True] * len(texts)
        return [bool(w) for w in self._woken_each(texts)]

    def _woken_each(self, texts: Sequence[str]) -> list[set[int]]:
        """The rules each text's keywords wake (``_always`` included), one scan per keyword.

        The casefolded texts are joined by NUL, which no keyword holds, so a keyword found in
        the joined string lies inside exactly one text; after a hit the scan resumes at the
        next text. A text that folds to ASCII can only hold ASCII keywords: those texts are
        joined apart, an ASCII string that the other keywords need not scan (and that the
        ASCII ones scan fastest). Same sets as one ``_extract`` computes per text.
        """
        folded = [t.casefold() for t in texts]
        if "\0" in "".join(folded) or self._nul_keyword:
            return [self._woken_in(t) for t in folded]
        out = [set(self._always) for _ in texts]
        ascii_texts = [n for n, t in enumerate(folded) if t.isascii()]
        other = [n for n, t in enumerate(folded) if not t.isascii()] if ascii_texts else None
        for group, keywords in (
            (ascii_texts, self._ascii_keywords),
            (range(len(folded)) if other is None else other, self._keywords),
        ):
            if not group:
                continue
            keys = list(group)
            parts = [folded[n] for n in keys]
            joined = "\0".join(parts)
            starts = list(itertools.accumulate((len(t) + 1 for t in parts[:-1]), initial=0))
            last = len(keys) - 1
            find = joined.find
            for k in keywords:
                woken = self._woken[k]
                pos = find(k)
                while pos >= 0:
                    n = bisect.bisect_right(starts, pos) - 1
                    out[keys[n]].update(woken)
                    if n == last:
                        break
                    pos = find(k, starts[n + 1])
        return out

    def extract_many(self, texts: Sequence[str]) -> list[list[Extraction]]:
        """``extract`` of every text, the keywords looked for once over all of them (see
        ``_woken_each``); a memoized extractor answers the texts it has seen and keeps the
        rest. Same answers as one ``extract`` call per text (a property test holds them)."""
        memo = {} if self._memo is None else self._memo
        todo = list(dict.fromkeys(t for t in texts if t and t not in memo))  # distinct, new
        for text, run in zip(todo, self._woken_each(todo), strict=True):
            memo[text] = self._read(text, run) if run else []
        return [list(memo[t]) if t else [] for t in texts]

    def read_memory(
        self, text: str | None, metadata: Mapping[str, Any] | None = None
    ) -> list[Extraction]:
        """The facts one stored memory states (docs/reference.md#stores), as the audit and diagnose
        read them.

        The text is read as a statement about the user in any phrasing memory systems write
        (first or third person, a name, no subject; English or Chinese). An explicit metadata
        key (``key``, ``subject``, ...) names the one fact the record holds, with its value from
        ``value`` or from the text; a ``category`` naming a known field stands in when the text
        states nothing the rules recognize. Odd metadata types are ignored, never an error.
        """
        # "Name: Mia Lopez", "Mia Lopez(Person): ..." as sentences first (memdiag.subjects)
        found = self.extract(as_first_person(unlabel(text))) if text else []
        person = entity_person(text) if text and "(" in text else None
        if person is not None and not any(e.field == "name" for e in found):
            # CrewAI's entity memory names a person: "Mia Lopez(Person): ..." states a name
            name, span = person
            found.insert(0, Extraction("name", name, self.is_strong("name"), span, "entity"))
        meta = metadata or {}
        key = first_text(meta, SUBJECT_KEYS)
        if key is not None:
            name = field_for_key(key)
            value = first_text(meta, VALUE_KEYS, numbers=True)
            same = [e for e in found if e.field == name]
            if value is None:
                value = same[0].value if same else (text or "").strip()
            if not value:
                return found
            strong = self.is_strong(name) or any(e.strong for e in same)
            return [Extraction(name, value, strong, (0, len(text or "")), "metadata.key")]
        if not found and text and text.strip():
            category = first_text(meta, CATEGORY_KEYS)
            kind = field_for_key(category) if category is not None else None
            if kind is not None and kind in FIELD_SYNONYMS:
                strong = self.is_strong(kind)
                return [Extraction(kind, text.strip(), strong, (0, len(text)), "metadata.category")]
        return found

    def extract(self, text: str) -> list[Extraction]:
        """Every value the rules find in ``text``, deduplicated by (field, value)."""
        if not text or self._memo is None:
            return self._extract(text) if text else []
        if (found := self._memo.get(text)) is None:
            found = self._memo[text] = self._extract(text)
        return list(found) if found else []  # a copy: the caller may change its list

    def _extract(self, text: str) -> list[Extraction]:
        run = self._woken_in(text.casefold())
        return self._read(text, run) if run else []

    def _woken_in(self, folded: str) -> set[int]:
        run = set(self._always)
        for k in self._keywords:
            if k in folded:
                run.update(self._woken[k])
        return run

    def _read(self, text: str, run: set[int]) -> list[Extraction]:
        """The values rules ``run`` (those ``text``'s keywords woke) find in ``text``."""
        found = self._run(text, run)
        if found:
            # questions, hypotheticals and quotes of others state nothing: blank them (same
            # length, so spans still point into ``text``) and read again. Only texts that
            # matched pay for it: most records of a large store match no rule.
            masked = mask_non_statements(text)
            if masked != text:
                found = self._run(masked, run)
        return found

    def _run(self, text: str, run: set[int]) -> list[Extraction]:
        found: list[Extraction] = []
        seen: set[tuple[str, str]] = set()
        for n in sorted(run):  # rule order, so results do not depend on set iteration
            c = self._compiled[n]
            for regex in c.regexes:
                for m in regex.finditer(text):
                    if _negated(text, m):
                        continue
                    for value, span in _values(c.rule, m):
                        key = (c.rule.field, value.casefold())
                        if key in seen:
                            continue
                        seen.add(key)
                        found.append(Extraction(c.rule.field, value, c.strong, span, c.rule.id))
        found.sort(key=lambda e: e.span[0])  # stable: rule order breaks ties
        return found


# a value that carries its own negation ("never book X", "don't eat pork", "不要…") is a rule
# or restriction; any other value is void when its clause is negated ("you don't have to use
# metric units", "I never said I'm vegan")
_NEGATIVE_VALUE = re.compile(
    r"(?i:never|don't|don’t|do not|not|must not|mustn't|should not|shouldn't|may not|cannot|"
    r"can't|can’t|no)\b|不|别|禁止|请勿|千万|绝对|永远不"
)


def _negated(text: str, m: re.Match[str]) -> bool:
    if "value" in m.re.groupindex and m.group("value") is not None:
        if _NEGATIVE_VALUE.match(m.group("value")):
            return False
        start = min(m.start(), m.start("value"))
    else:
        start = m.start()
    lead = text[m.start() : start] if start > m.start() else ""
    if _NEGATIVE_VALUE.search(lead):
        return False
    return negated_before(text, m.start())


def _values(rule: Rule, m: re.Match[str]) -> list[tuple[str, tuple[int, int]]]:
    if "value" in m.re.groupindex and m.group("value") is not None:
        raw, span = m.group("value"), m.span("value")
    elif rule.value is not None:
        return [(rule.value, m.span())]
    else:
        return []
    if rule.value is not None:  # the pattern only locates; the value is fixed
        return [(rule.value, span)]
    if rule.trim_clauses and rule.normalize != "timezone":
        raw = (_CLAUSE_LIST if rule.split else _CLAUSE).sub("", raw)
    parts = [p for p in _SPLIT.split(raw)] if rule.split else [raw]
    out = []
    for part in parts:
        value = _normalize(_clean(part), rule.normalize)
        if value and len(value) <= MAX_VALUE_CHARS:
            out.append((value, span))
    return out


def _clean(value: str) -> str:
    value = _EDGE.sub("", value.strip())
    value = _ARTICLE.sub("", value)
    if has_cjk(value):
        value = _CJK_TAIL.sub("", value)
    return " ".join(value.split())


def _normalize(value: str, how: str) -> str:
    if not value:
        return value
    if how == "lower":
        return value.lower()
    if how == "first_lower":
        # keep "Kyoto" in "never book Kyoto hotels", lower only a sentence-initial capital
        return value[0].lower() + value[1:] if not value[:2].isupper() else value
    if how == "rule":  # "never to book X" (asked never to ...) reads "never book X"
        value = re.sub(r"^(?i:(never|not)) to ", r"\1 ", value)
        return _normalize(value, "first_lower")
    if how == "timezone":
        return _timezone(value)
    if how == "units":
        return {"公制": "metric", "英制": "imperial"}.get(value, value.lower())
    return value


def _timezone(value: str) -> str:
    """'utc + 8' → 'UTC+8'; 东八区 / 北京时间 → UTC+8 / UTC+8; IANA names unchanged."""
    if value == "北京时间":
        return "UTC+8"
    m = re.fullmatch(r"([东西])([一二三四五六七八九十]{1,2})区", value)
    if m:
        digits = m.group(2)
        if digits == "十":
            hours = 10
        elif digits.startswith("十"):
            hours = 10 + _CN_DIGITS.get(digits[1], 0)
        else:
            hours = _CN_DIGITS.get(digits[0], 0)
        return f"UTC{'+' if m.group(1) == '东' else '-'}{hours}"
    m = re.fullmatch(r"(?i)(UTC|GMT)\s*([+\-−])\s*(\d{1,2})(?::?(\d{2}))?", value)
    if m:
        sign = "-" if m.group(2) in "-−" else "+"
        minutes = f":{m.group(4)}" if m.group(4) and m.group(4) != "00" else ""
        return f"{m.group(1).upper()}{sign}{int(m.group(3))}{minutes}"
    if re.fullmatch(r"(?i)utc|gmt", value):
        return value.upper()
    return value


# --- loading -------------------------------------------------------------------------------


def load_rules(path: str | Path, shipped: bool = False) -> tuple[list[Rule], dict[str, FieldSpec]]:
    """Rules and field specs from a rules YAML file; errors name file and line.

    ``shipped``: memdiag's own file, whose parsed form may come from the user cache.
    """
    from memdiag.yamlio import line_of, load_yaml, load_yaml_shipped, to_dataclass

    name = str(path)
    data = load_yaml_shipped(path) if shipped else load_yaml(path)
    if data is None:
        return [], {}
    parsed = to_dataclass(RulesFile, data, name)
    if parsed.version != 1:
        raise InputError(
            f"unsupported rules version {parsed.version}; expected 1",
            path=name,
            line=line_of(data, "version"),
        )
    fields: dict[str, FieldSpec] = {}
    raw_fields = data.get("fields") or {}
    for key, spec in raw_fields.items():
        fields[str(key)] = (
            to_dataclass(FieldSpec, spec, name, f"fields.{key}")
            if spec is not None
            else FieldSpec()
        )
    raw_rules = data.get("rules") or []
    for k, rule in enumerate(parsed.rules):
        raw = raw_rules[k]
        # memdiag's own patterns are compiled when first needed (a test compiles them all)
        _check_rule(
            rule, raw, name, line_of(raw) or line_of(raw_rules), compile_patterns=not shipped
        )
    return parsed.rules, fields


def _check_rule(
    rule: Rule, raw: Any, path: str, line: int | None, compile_patterns: bool = True
) -> None:
    from memdiag.yamlio import line_of

    if not rule.patterns:
        raise InputError(f"rule {rule.id!r}: needs at least one pattern", path=path, line=line)
    if rule.normalize not in NORMALIZERS:
        raise InputError(
            f"rule {rule.id!r}: unknown normalize {rule.normalize!r}; "
            f"choose one of: {', '.join(NORMALIZERS)}",
            path=path,
            line=line_of(raw, "normalize") or line,
        )
    item_lines: list[int] = []
    patterns_raw = raw.get("patterns") if isinstance(raw, dict) else None
    if patterns_raw is not None:
        item_lines = list(getattr(patterns_raw, "item_lines", []))
    for k, pattern in enumerate(rule.patterns if compile_patterns else ()):
        pline = item_lines[k] if k < len(item_lines) else line
        try:
            compiled = re.compile(pattern, re.IGNORECASE if rule.ignore_case else 0)
        except re.error as exc:
            raise InputError(
                f"rule {rule.id!r}: invalid regex: {exc}", path=path, line=pline
            ) from None
        if "value" not in compiled.groupindex and rule.value is None:
            raise InputError(
                f"rule {rule.id!r}: pattern needs a named group (?P<value>...) "
                "or the rule a fixed `value:`",
                path=path,
                line=pline,
            )


@lru_cache(maxsize=1)
def _builtin() -> tuple[tuple[Rule, ...], tuple[tuple[str, FieldSpec], ...]]:
    from memdiag.fileio import shipped_file

    with shipped_file("data", BUILTIN_RULES) as path:
        rules, fields = load_rules(path, shipped=True)
    return tuple(rules), tuple(fields.items())


@lru_cache(maxsize=1)
def default_extractor() -> Extractor:
    """The extractor with the built-in English and Chinese rules (cached)."""
    rules, fields = _builtin()
    return Extractor(list(rules), dict(fields))


def load_extractor(extra_rules_path: str | None) -> Extractor:
    """Built-in rules plus the user's rules file (its fields override built-in field specs).

    The user's file is read on every call (not cached), so an edited file is picked up.
    """
    if not extra_rules_path:
        return default_extractor()
    rules, fields = _builtin()
    extra, extra_fields = load_rules(extra_rules_path)
    return Extractor([*rules, *extra], {**dict(fields), **extra_fields})


def strong_facts(text: str) -> list[Extraction]:
    """The docs/reference.md#concepts strong facts the built-in rules find in ``text``."""
    return [e for e in default_extractor().extract(text) if e.strong]
