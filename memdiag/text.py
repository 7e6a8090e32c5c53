"""Language rules shared by every part that reads text: scripts, sentences, normalization, values.

One table of CJK ranges (Japanese kana, CJK ideographs and their extension A, compatibility
ideographs, Hangul) serves the summarizer, the fact matcher, the extractor and the audit.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

# Hiragana/Katakana, CJK Extension A, Unified Ideographs, Hangul syllables, Compatibility Ideographs
CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK = re.compile(f"[{CJK_RANGES}]")
CJK_RUN = re.compile(f"[{CJK_RANGES}]+")

_SPACE = re.compile(r"\s+")
# a sentence ends at . ! ? followed by space (not "3.5" or "e.g.x"), at CJK 。！？； or a newline
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])\s*|\n+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[\s\-]+|(?<=\w)\.(?=\w)")
_UNDERSCORES = re.compile(r"_+")


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds any Chinese, Japanese or Korean character."""
    return CJK.search(text) is not None


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
    do, and the NUL comes out as a sentence of its own that marks where a text ends.
    """
    if any("\0" in t for t in texts):
        return [split_sentences(t) for t in texts]
    out: list[list[str]] = [[]]
    for part in _BOUNDARY.split("\n\0\n".join(texts)):
        s = " ".join(part.split())
        if s == "\0":
            out.append([])
        elif s:
            out[-1].append(s)
    return out if texts else []


def fold(text: str) -> str:
    """NFKC + casefold."""
    return unicodedata.normalize("NFKC", text).casefold()


def normalize(text: str) -> str:
    """Casefold, NFKC, collapse whitespace and strip punctuation at the edges of words."""
    text = re.sub(r"[^\w\s]", " ", fold(text))
    return _SPACE.sub(" ", text).strip()


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


# Memories are usually written about "the user"; the extraction rules read first-person
# statements, so the subject is rewritten before extracting ("User lives in X" → "I live in X").
_POSSESSIVE = re.compile(r"\b(?:the )?user's\b", re.IGNORECASE)
_SUBJECT_VERB = re.compile(
    r"\b(?:the )?user (is|was|has|does not|doesn't|can't|cannot|never|always|usually|often|"
    r"also|still|"
    r"\w+?(?:ies|ches|shes|sses|xes|zes|s))\b",
    re.IGNORECASE,
)
_ADVERB_VERB = re.compile(
    r"\bI (never|always|usually|often|also|still) (\w+?(?:ies|ches|shes|sses|xes|zes|s))\b"
)
_ZH_SUBJECT = re.compile(r"(^|[。！？.!?]\s*)用户(?=的|\S)")
_FIXED_VERBS = {
    "is": "am",
    "was": "was",
    "has": "have",
    "does not": "do not",
    "doesn't": "don't",
    "can't": "can't",
    "cannot": "cannot",
    "never": "never",
    "always": "always",
    "usually": "usually",
    "often": "often",
    "also": "also",
    "still": "still",
}


def _first_person_verb(verb: str) -> str:
    low = verb.lower()
    if low in _FIXED_VERBS:
        return _FIXED_VERBS[low]
    if low.endswith("ies"):
        return verb[:-3] + "y"
    if low.endswith(("ches", "shes", "sses", "xes", "zes")):
        return verb[:-2]
    if low.endswith("ss"):  # "User is always careless" has no verb ending to strip
        return verb
    return verb[:-1]


def as_first_person(text: str) -> str:
    """Rewrite third-person memory text about the user into the first person."""
    t = text
    # Cheap substring tests first: this runs once per record of large collections.
    if "user" in t or "User" in t or "USER" in t:
        t = _POSSESSIVE.sub(lambda m: "My" if m.start() == 0 else "my", t)
        t = _SUBJECT_VERB.sub(lambda m: "I " + _first_person_verb(m.group(1)), t)
        t = _ADVERB_VERB.sub(lambda m: f"I {m.group(1)} {_first_person_verb(m.group(2))}", t)
    if "用户" in t:
        t = _ZH_SUBJECT.sub(r"\1我", t)
    return t
