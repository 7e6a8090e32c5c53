"""Language rules shared by every part that reads text: scripts, sentences, normalization, values.

One table of CJK ranges (Japanese kana, CJK ideographs and their extension A, compatibility
ideographs, Hangul) serves the summarizer, the fact matcher, the extractor and the audit.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from memdiag.sentence_split import plain, sentences, split_plain, stops


class LazyPattern:
    """A regex compiled on first use. Compiling costs 0.2-2 ms a pattern, and a replay needs
    few of the memory-phrasing patterns below: start-up stays light. After the first use the
    pattern's methods are plain attributes of this object, as fast as the compiled pattern's."""

    match: Callable[..., re.Match[str] | None]
    fullmatch: Callable[..., re.Match[str] | None]
    search: Callable[..., re.Match[str] | None]
    finditer: Callable[..., Iterator[re.Match[str]]]
    findall: Callable[..., list[Any]]
    split: Callable[..., list[Any]]
    sub: Callable[..., str]

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(self.pattern, self.flags)
        for method in ("match", "fullmatch", "search", "finditer", "findall", "split", "sub"):
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)


# Hiragana/Katakana, CJK Extension A, Unified Ideographs, Hangul syllables, Compatibility Ideographs
CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK = LazyPattern(f"[{CJK_RANGES}]")  # ~4 ms to compile: ASCII text never needs it
CJK_RUN = LazyPattern(f"[{CJK_RANGES}]+")

_SPACE = re.compile(r"\s+")
# normalize's runs of punctuation and whitespace (compiled: it runs per message)
_NOT_WORDS = re.compile(r"\W+")
# a sentence ends at . ! ? followed by space (not "3.5" or "e.g.x"), at CJK 。！？； or a newline
_BOUNDARY = LazyPattern(r"(?<=[.!?])\s+|(?<=[。！？；])\s*|\n+")
# The same boundaries in a text without 。！？；: every one starts at a whitespace character, so
# the pattern starts with one and the regex engine skips to the next whitespace instead of
# trying the lookbehinds at every position.
_PLAIN_BOUNDARY = LazyPattern(r"\s(?:(?<=[.!?]\s)\s*|(?<=\n)\n*)")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[\s\-]+|(?<=\w)\.(?=\w)")
_UNDERSCORES = re.compile(r"_+")


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds any Chinese, Japanese or Korean character."""
    return not text.isascii() and CJK.search(text) is not None


def cjk_runs(text: str) -> list[str]:
    """The runs of CJK characters in ``text`` (none in ASCII text, which skips the regex)."""
    return [] if text.isascii() else CJK_RUN.findall(text)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split at . ! ? and CJK 。！？； and at newlines."""
    out = []
    for part in _BOUNDARY.split(text):
        s = " ".join(part.split())
        if s:
            out.append(s)
    return out


def split_sentences_many(texts: Sequence[str]) -> list[list[str]]:
    """``split_sentences`` of every text, from one split of them all.

    The texts are joined by a newline, NUL, newline: the newlines are boundaries that end a
    text's last sentence and start the next text's first one exactly as the string's edges
    do, and the NUL comes out as a sentence of its own that marks where a text ends. A newline
    is put after each of 。！？； first, which makes their boundary a newline one (the whitespace
    a boundary leaves at a sentence's edge is dropped either way). Texts whose only whitespace
    is single spaces and newlines (``sentence_split.plain``, most chat messages) are split
    with ``str`` methods: every ". ", "! ", "? " becomes a newline and the text is split at
    newlines, faster than a regex; the others with ``_PLAIN_BOUNDARY``, which finds every
    boundary ~3× faster than ``_BOUNDARY``. Property tests hold the results equal.
    """
    if any("\0" in t for t in texts):
        return [split_sentences(t) for t in texts]
    if not texts:
        return []
    stopped = [stops(t) for t in texts]
    joined = "\n\0\n".join(stopped)
    if plain(joined):
        return sentences(split_plain(joined), plain=True)
    easy = [n for n, t in enumerate(stopped) if plain(t)]
    if not easy:
        return sentences(_PLAIN_BOUNDARY.split(joined))
    other = [n for n, t in enumerate(stopped) if not plain(t)]
    out: list[list[str]] = [[] for _ in texts]
    for group, split in (
        (easy, sentences(split_plain("\n\0\n".join([stopped[n] for n in easy])), True)),
        (other, sentences(_PLAIN_BOUNDARY.split("\n\0\n".join([stopped[n] for n in other])))),
    ):
        for n, found in zip(group, split, strict=True):
            out[n] = found
    return out


def fold(text: str) -> str:
    """NFKC + casefold. ASCII text is its own NFKC form: only casefolded (``isascii`` is O(1))."""
    if text.isascii():
        return text.casefold()
    return unicodedata.normalize("NFKC", text).casefold()


def normalize(text: str) -> str:
    """Casefold, NFKC, collapse whitespace and strip punctuation at the edges of words."""
    return normalize_folded(fold(text))


# each ASCII character the regex's \w does not match, as a space (only ASCII text is translated)
_ASCII_NOT_WORD = bytes(b if re.fullmatch(r"\w", chr(b)) else 0x20 for b in range(256))


def normalize_folded(folded: str) -> str:
    """``normalize`` of a text from its ``fold``: punctuation to spaces, whitespace collapsed.
    Every run of non-word characters becomes one space, in one pass (a property test holds it
    equal to the two steps). An ASCII text (most messages) has its bytes translated instead
    and its words joined by one space: the same text, about four times faster than the
    regex's substitution (on the 50,000 messages of the bench transcript, 0.3 s → 0.07 s)."""
    if folded.isascii():
        return " ".join(folded.encode("ascii").translate(_ASCII_NOT_WORD).decode("ascii").split())
    return _NOT_WORDS.sub(" ", folded).strip()


def normalize_key(key: str) -> str:
    """Normalize a fact key so that spellings of one key compare equal.

    ``"User Name"``, ``"user-name"``, ``"user.name"``, ``"userName"`` → ``"user_name"``.
    """
    k = _CAMEL.sub("_", key.strip())
    k = _SEPARATORS.sub("_", k.lower())
    return _UNDERSCORES.sub("_", k).strip("_")


def normalize_document(text: str) -> str:
    """Text identity for exact duplicates: NFKC, casefold, collapsed spaces, no final period."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = " ".join(t.split())
    return t.rstrip(" .!。！")


def value_norm(value: str) -> str:
    t = unicodedata.normalize("NFKC", value).casefold()
    return " ".join(re.sub(r"[^\w\s+/:-]", " ", t).split())


def same_value(a: str, b: str) -> bool:
    """Whether two values of one field agree ("Mia" ~ "Mia Chen", "UTC+8" ~ "utc+8")."""
    na, nb = value_norm(a), value_norm(b)
    if not na or not nb:
        return na == nb
    if na == nb:
        return True
    ta, tb = set(na.split()), set(nb.split())
    if ta <= tb or tb <= ta:
        return True
    # CJK values have no spaces: containment of the shorter string.
    short, long_ = sorted((na, nb), key=len)
    return has_cjk(short) and short in long_


# --- phrasing: who a statement is about, and whether it states anything --------------------
#
# The extraction rules read first-person statements ("I live in Berlin"). Memory stores write
# the same fact about the user in the third person ("User lives in Berlin", "Mia lives in
# Berlin", "用户住在柏林"), without a subject ("Lives in Berlin", "对花生过敏"), so a stored
# memory is rewritten into the first person before extracting (``as_first_person``). And not
# every sentence states something: a question, a hypothetical or a quote of someone else holds
# no fact, so those spans are blanked before the rules run (``mask_non_statements``).

_VERB_S = r"\w+?(?:ies|ches|shes|sses|xes|zes|s)"
_AUX = (
    r"is|was|has|had|does not|doesn't|did not|didn't|can't|cannot|can|will|would|should|"
    r"never|always|usually|often|also|still|now|recently|just|no longer"
)
# who a memory is about when it names no one: the user, or the role the agent knows them by
_ROLES = r"(?:the )?user|the (?:traveler|traveller|customer|client|human|guest|patient)"
_ROLE_HINTS = ("user", "User", "USER", "raveler", "raveller", "ustomer", "lient", "uman", "uest")
_POSSESSIVE = LazyPattern(rf"\b(?:{_ROLES})(?:'s|’s)", re.IGNORECASE)

_ADVERB_VERB = LazyPattern(
    rf"\bI (never|always|usually|often|also|still|now|recently|just|no longer) ({_VERB_S})\b"
)
# a sentence start: text start, or after . ! ? ; : and space, or a newline (with list bullets)
# where a sentence starts: the text start, after . ! ? ; : and a space, after a newline; the
# rules below are tried there only (anchored), not at every position of long memories
_SENTENCE_END = re.compile(r"[.!?;:]\s|\n")
_LEAD_SPACE = re.compile(r"\s*(?:[-*•]\s*)?")
# capitalised words that begin sentences without naming anyone
_NOT_NAMES = (
    "The|This|That|These|Those|It|Its|There|Here|They|We|You|Your|Our|His|Her|Their|What|Which|"
    "Who|Where|When|Why|How|Everyone|Everybody|Nobody|Someone|Somebody|Something|Everything|"
    "Nothing|Each|Every|All|Some|Any|No|One|If|But|And|Or|So|Then|Today|Tomorrow|Yesterday|"
    "Please|Also|Never|Always|Note|Notes|Memory|Summary|Session|Assistant|Agent|System|Bot|"
    "Name|Birthday|Lives|Is|Was|Has|Had|Does|Did|Prefers|Likes|Loves|Works|Moved|User|Users|"
    "I|My|Me|Mr|Mrs|Ms|Dr|Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
)
# third-person verbs that state something about a person (a closed list: "Buys pretzels" must
# not read as a person called Buys)
_THIRD = (
    r"lives|moved|prefers|likes|loves|enjoys|works|uses|speaks|eats|drinks|avoids|hates|"
    r"dislikes|wants|needs|owns|follows|keeps|suffers|says|said|asked|goes|travels|flies|"
    r"studies|teaches|has been|was born|got|is called|was diagnosed"
)
_ADVERBS = r"never|always|usually|often|also|still|now|recently|just|no longer"
_NAME_WORD = rf"(?!(?:{_NOT_NAMES})\b)(?!(?i:{_THIRD}|{_ADVERBS})\b)[A-Z][a-z]+"
_NAME = rf"{_NAME_WORD}(?: {_NAME_WORD})?"
_NAMED_POSSESSIVE = LazyPattern(rf"(?:{_NAME}|She|He)(?:'s|’s|s') ")
_SUBJECT_VERB = LazyPattern(
    rf"\b(?:{_ROLES}) (?:(?P<aux>{_AUX})|(?P<verb>{_THIRD}|{_VERB_S}))\b", re.IGNORECASE
)
_NAMED_SUBJECT = LazyPattern(rf"(?:{_NAME}|She|He) (?:(?P<verb>{_THIRD})|(?P<aux>{_AUX}))\b")
# "Lives in Berlin", "Is allergic to peanuts", "Never eats pork": mem0's subject-less style
_BARE_VERB = LazyPattern(
    rf"(?:(?P<adv>(?i:{_ADVERBS})) (?P<verb2>{_THIRD}|{_VERB_S})|"
    rf"(?P<verb>(?i:{_THIRD}|is|was|has|had|does not|doesn't|did not|didn't|cannot|can't)))"
    r"\b(?=\s)"
)
_BARE_NOUN = LazyPattern(
    r"(?P<noun>Name|Full name|First name|Birthday|Date of birth|Time ?zone|Timezone|"
    r"Job|Occupation|Diet|Allergies|Allergy|Home city|Home|Units|Favou?rite \w+)"
    r"(?= (?:is|are|was)\b)"
)
_BARE_ADJ = LazyPattern(r"(?P<adj>Allergic to|Based in|Born on|Born in|Vegetarian|Vegan)\b")
_ZH_SUBJECT = LazyPattern(r"(^|[。！？.!?；;\n]\s*)(?:这位)?用户(?=的|\S)")
_ZH_NAMED = LazyPattern(
    r"(^|[。！？.!?；;\n]\s*)(?:(?!如果|假如|假设|要是|万一|假使|倘若|想象|假装)"
    r"(?:(?![我你他她它咱们])[\u4e00-\u9fff]){2,3}?|[A-Z][a-z]+|他|她)"
    r"(?=的(?:名字|生日|时区|工作|职业|饮食)|对\S{1,12}过敏|住在|搬到|有\S{1,6}[病症]|喜欢|偏好|"
    r"吃素|不吃|不喝|习惯用|要求|叫[\u4e00-\u9fffA-Z])"
)
_ZH_BARE = LazyPattern(
    r"(^|[。！？.!?；;\n]\s*)(?=(?:名字|生日|时区|工作|职业)(?:是|叫)|对\S{1,12}过敏|住在|搬到|"
    r"有\S{1,6}[病症]|喜欢|偏好|吃素|不吃|不喝|习惯用|要求|叫[\u4e00-\u9fffA-Z])"
)
_FIXED_VERBS = {
    "is": "am",
    "was": "was",
    "has": "have",
    "had": "had",
    "does not": "do not",
    "doesn't": "don't",
    "did not": "did not",
    "didn't": "didn't",
    "can't": "can't",
    "cannot": "cannot",
    "can": "can",
    "will": "will",
    "would": "would",
    "should": "should",
    "never": "never",
    "always": "always",
    "usually": "usually",
    "often": "often",
    "also": "also",
    "still": "still",
    "now": "now",
    "recently": "recently",
    "just": "just",
    "no longer": "no longer",
    "says": "say",
    "does": "do",
    "goes": "go",
}
_NOUN_PHRASES = {"timezone": "time zone", "home": "home city"}
_ADJ_PHRASES = {
    "allergic to": "I am allergic to",
    "based in": "I am based in",
    "born on": "I was born on",
    "born in": "I was born in",
    "vegetarian": "I am vegetarian",
    "vegan": "I am vegan",
}


def _first_person_verb(verb: str) -> str:
    low = verb.lower()
    if low in _FIXED_VERBS:
        return _FIXED_VERBS[low]
    if " " in low:  # "is called" → "am called", "has been" → "have been"
        head, tail = low.split(" ", 1)
        return f"{_first_person_verb(head)} {tail}"
    if low.endswith("ies"):
        return low[:-3] + "y"
    if low.endswith(("ches", "shes", "sses", "xes", "zes")):
        return low[:-2]
    if low.endswith("ss") or not low.endswith("s"):  # "moved", "is always careless"
        return low
    return low[:-1]


def _verb_phrase(m: re.Match[str]) -> str:
    return _first_person_verb(m.group("aux") or m.group("verb"))


def _bare_verb(m: re.Match[str]) -> str:
    if m.group("adv"):  # "Never eats pork" → "I never eat pork"; "Never book ..." stays
        adv = m.group("adv").lower()
        return f"I {adv} {_first_person_verb(m.group('verb2'))}"
    first = m.group("verb")
    if first[0].islower():
        return m.group(0)
    return f"I {_first_person_verb(first)}"


# tried in order at each sentence start; the first that matches rewrites it
_AT_START: tuple[tuple[LazyPattern, Callable[[re.Match[str]], str]], ...] = (
    (_NAMED_POSSESSIVE, lambda m: "My "),
    (_NAMED_SUBJECT, lambda m: "I " + _verb_phrase(m)),
    (
        _BARE_NOUN,
        lambda m: "My " + _NOUN_PHRASES.get(m.group("noun").lower(), m.group("noun").lower()),
    ),
    (_BARE_ADJ, lambda m: _ADJ_PHRASES[m.group("adj").lower()]),
    (_BARE_VERB, _bare_verb),
)


def _rewrite_sentence_starts(t: str) -> str:
    starts = [0, *(m.end() for m in _SENTENCE_END.finditer(t))]
    out: list[str] = []
    last = 0
    for start in starts:
        pos = _LEAD_SPACE.match(t, start).end()  # type: ignore[union-attr]
        if pos < last or pos >= len(t) or not t[pos].isupper():
            continue
        for regex, rewrite in _AT_START:
            m = regex.match(t, pos)
            if m:
                out.append(t[last:pos])
                out.append(rewrite(m))
                last = m.end()
                break
    if not out:
        return t
    out.append(t[last:])
    return "".join(out)


def _sentence_start(text: str, i: int) -> bool:
    head = text[:i].rstrip(" -*•")
    return not head or head[-1] in ".!?;:\n"


def as_first_person(text: str) -> str:
    """Rewrite a stored memory about the user into the first person.

    "User lives in Berlin", "Mia lives in Berlin", "She lives in Berlin" and "Lives in Berlin"
    all become "I live in Berlin"; "Mia's time zone is UTC+1" and "Time zone is UTC+1" become
    "My time zone is UTC+1"; "用户对花生过敏", "小美对花生过敏" and "对花生过敏" become
    "我对花生过敏". Meant for memories (where every statement is about the user), not for
    conversations, where "Mia lives in Berlin" may be about a friend.
    """
    t = text
    # Cheap tests first: this runs once per record of large collections.
    if any(h in t for h in _ROLE_HINTS):
        t = _POSSESSIVE.sub(lambda m: "My" if _sentence_start(m.string, m.start()) else "my", t)
        t = _SUBJECT_VERB.sub(lambda m: "I " + _verb_phrase(m), t)
    t = _rewrite_sentence_starts(t)
    if "I " in t:
        t = _ADVERB_VERB.sub(lambda m: f"I {m.group(1)} {_first_person_verb(m.group(2))}", t)
    if has_cjk(t):
        t = _ZH_SUBJECT.sub(r"\1我", t)
        t = _ZH_NAMED.sub(r"\1我", t)
        t = _ZH_BARE.sub(r"\1我", t)
        t = re.sub(r"(^|[。！？.!?；;\n]\s*)我(?=名字|生日|时区|工作|职业)", r"\1我的", t)
    return t


# -- what states nothing ------------------------------------------------------------------------

# a sentence: up to ! ? 。！？； or a newline, or a period followed by space / the end
_SENTENCE = LazyPattern(r"[^!?。！？；\n]*?(?:[!?。！？；]+|\.(?=\s|$)|\n|$)")
_QUOTES = LazyPattern(
    r"“[^”\n]{2,}”|「[^」\n]{2,}」|『[^』\n]{2,}』|\"[^\"\n]*[\s\u4e00-\u9fff][^\"\n]*\""
    r"|(?<![\w'’])'[^'\n]*\s[^'\n]*'(?![\w])"
)
# the speaker quoting themself ("I always say: ..."): their quote is a statement
_OWN_QUOTE = LazyPattern(
    r"\b(?:I|we)\s+(?:always\s+)?(?:say|said|wrote|told you|asked)[:,]?\s*$", re.I
)
_QUESTION_START = LazyPattern(
    r"\W*(?:(?:what|what's|which|who|whom|whose|where|when|why|how)\b|"
    r"(?:do|does|did|am|is|are|was|were|can|could|would|will|should|shall|may|might|must|have|"
    r"has|had|isn't|aren't|wasn't|don't|doesn't|didn't|won't|wouldn't|can't|couldn't|"
    r"shouldn't|haven't|hasn't)\s+(?:I|you|we|they|he|she|it|my|your|our|their|the|there|this|"
    r"that|these|those|anyone|someone)\b)",
    re.IGNORECASE,
)
_ZH_QUESTION = LazyPattern(
    r"[吗么呢][\s。.！!]*$|是不是|有没有|会不会|能不能|要不要|对不对|哪里|哪儿|哪个|什么|为什么|"
    r"怎么|多少|几月|几号|谁"
)
_HYPOTHETICAL = LazyPattern(
    r"\b(?:suppose|supposing|imagine|pretend|hypothetically|what if|let's say|let’s say|"
    r"lets say|say I|I wish|if only|assuming|role-?play)\b|假设|假如|想象|假装|要是|万一|倘若|假使",
    re.IGNORECASE,
)
# a clause: up to a comma or semicolon (the separator stays with the clause before it)
_CLAUSE_SPAN = LazyPattern(r"[^,，;；、]+[,，;；、]*|[,，;；、]+")
_HYPOTHETICAL_HINTS = (
    "suppos",
    "imagine",
    "pretend",
    "hypothetical",
    "what if",
    "let's say",
    "let’s say",
    "lets say",
    "say i",
    "i wish",
    "if only",
    "assuming",
    "role",
    "假设",
    "假如",
    "想象",
    "假装",
    "要是",
    "万一",
    "倘若",
    "假使",
)
_CONDITION_HINTS = ("if", "in case", "unless", "whether", "如果")
# a condition holds until the next comma: "If you book a hotel, never pick one by the station"
_CONDITION = LazyPattern(
    r"\b(?:if|in case|unless|even if|whether)\b[^,，;；]*|如果[^,，;；]*", re.I
)
# characters that may start something to blank: question marks, quotes, CJK text
_MASK_CHARS = re.compile('[?？"“「『' + CJK_RANGES + "]|(?<!\\w)'")
_HINTS = (*_HYPOTHETICAL_HINTS, *_CONDITION_HINTS)
# a question word order at a sentence start (the text's start, a newline, a sentence end and a
# space), in one linear scan: a start is tried where a run of non-word characters begins, the
# first one committed to (atomic), the run taken whole (docs/engine.md, "Long runs")
assert _QUESTION_START.pattern.startswith(r"\W*")
_QUESTION_AT_START = re.compile(
    r"(?:^|(?<!\W)(?>\W*?(?:\n|[.!?;:]\s)))\W*+" + _QUESTION_START.pattern[3:], re.I
)


def _needs_mask(text: str) -> bool:
    """Cheap tests (this runs on records of large stores): whether anything may be blanked."""
    if _MASK_CHARS.search(text):
        return True
    low = text.casefold()
    return any(w in low for w in _HINTS) or _QUESTION_AT_START.search(text) is not None


def _blank(chars: list[str], start: int, end: int) -> None:
    for i in range(start, end):
        if chars[i] != "\n":
            chars[i] = " "


def mask_non_statements(text: str) -> str:
    """``text`` with what states nothing blanked out (same length, so spans still hold).

    Blanked: questions (a "?" or a question word order, 吗/什么/哪里…), hypotheticals (suppose,
    imagine, what if, 假如…; a condition up to its comma), and quotes of others' words.
    """
    if not _needs_mask(text):
        return text
    chars: list[str] | None = None
    if any(q in text for q in "\"“「『'"):
        for m in _QUOTES.finditer(text):
            if _OWN_QUOTE.search(text[max(0, m.start() - 40) : m.start()]):
                continue
            chars = chars if chars is not None else list(text)
            _blank(chars, m.start(), m.end())
    low = text.casefold()
    asks = "?" in text or "？" in text
    cjk = has_cjk(text)
    hypo = any(w in low for w in _HYPOTHETICAL_HINTS)
    cond = any(w in low for w in _CONDITION_HINTS)
    masked = text if chars is None else "".join(chars)
    for m in _SENTENCE.finditer(masked):
        s = m.group(0)
        if not s.strip():
            continue
        if _QUESTION_START.match(s) or (hypo and _HYPOTHETICAL.search(s)):
            chars = chars if chars is not None else list(text)
            _blank(chars, m.start(), m.end())
            continue
        # a question often follows statements in one sentence ("我叫林晓，能帮我规划一下吗？",
        # "I'm allergic to peanuts, can you suggest a snack?"): only its own clauses go
        asked = s.rstrip("\"'”’」』) \n").endswith(("?", "？"))
        clauses = list(_CLAUSE_SPAN.finditer(s)) if (asks or cjk or "," in s) else []
        for k, c in enumerate(clauses):
            part = c.group(0)
            if (
                (asked and k == len(clauses) - 1)
                or (k and _QUESTION_START.match(part))
                or (has_cjk(part) and _ZH_QUESTION.search(part))
            ):
                chars = chars if chars is not None else list(text)
                _blank(chars, m.start() + c.start(), m.start() + c.end())
        for c in _CONDITION.finditer(s) if cond else ():
            chars = chars if chars is not None else list(text)
            _blank(chars, m.start() + c.start(), m.start() + c.end())
    return text if chars is None else "".join(chars)


_WORDS = re.compile(r"[^\W_]")


def states_something(text: str) -> bool:
    """Whether anything of ``text`` is left once questions, hypotheticals and quotes of others
    are blanked (``mask_non_statements``): "Can I pick seats when I check in?" states nothing,
    "I'm allergic to peanuts, can you suggest a snack?" states the allergy."""
    return _WORDS.search(mask_non_statements(text)) is not None


_NEGATION_BEFORE = re.compile(
    r"(?:\b(?:not|never|no longer|no need to|n't|don't|doesn't|didn't|won't|can't|cannot)\b|n't\b|"
    r"[不没别])[^,，.。;；:：!！?？]*$",
    re.IGNORECASE,
)
_NOT_NEGATING = LazyPattern(
    r"(?:\b(?:don't|do not|never|n't)\s+(?:forget|ignore)\b|别忘|不要忘|不能忘|千万别忘)"
    r"[^,，.。;；:：!！?？]*$",
    re.IGNORECASE,
)


def negated_before(text: str, start: int) -> bool:
    """Whether the clause before ``start`` negates what follows ("you don't have to use ...").

    "Don't forget I'm vegetarian" asserts the fact, so forgetting-negations do not count.
    """
    head = text[max(0, start - 60) : start]
    cut = max(head.rfind(c) for c in ",，.。;；:：!！?？\n")
    head = head[cut + 1 :]
    return bool(_NEGATION_BEFORE.search(head)) and not _NOT_NEGATING.search(head)
