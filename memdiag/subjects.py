"""Who a stored memory is about, in the phrasings memory libraries write (docs/stores.md).

``memory_subject`` names the person a memory's sentence is about ("Tom Becker lives in Paris"),
or None for the user; ``unlabel`` rewrites labelled and entity forms into sentences the
extraction rules read ("Name: Mia Lopez" -> "My name is Mia Lopez"; CrewAI's "Mia Lopez(Person):
A traveler who is allergic to peanuts" -> its description, one clause per sentence);
``entity_person`` is the person an entity line names.
"""

from __future__ import annotations

import re

from memdiag.text import _NAME, _NAMED_POSSESSIVE, _NAMED_SUBJECT, LazyPattern

# a labelled field ("Name: Mia Lopez", "- Time zone: UTC+1"), as profile-style memories write it
_LABEL = LazyPattern(
    r"(?m)^(?P<lead>\s*(?:[-*•]\s*)?)(?P<noun>Name|Full name|First name|Birthday|Date of birth|"
    r"Time ?zone|Timezone|Job|Occupation|Diet|Allergies|Allergy|Home city|Units)\s*:\s*(?=\S)"
)
# CrewAI's entity memory: "Mia Lopez(Person): A traveler from Berlin" (name, type, description)
ENTITY_LINE = LazyPattern(r"^\s*(?P<name>[^()\n:]{1,80}?)\s*\((?P<type>[A-Za-z][\w ]{0,30})\):\s*")
PERSON_TYPES = frozenset({"person", "human", "user", "customer", "client", "traveler", "people"})


_RELATIVE = LazyPattern(
    r",?\s+(?:who|and)\s+(?P<verb>is|was|has|had|lives|prefers|likes|works|speaks)\b"
)


def _entity_sentences(description: str) -> str:
    """ "A traveler from Berlin who is allergic to peanuts" as "... Berlin. Is allergic to
    peanuts": each relative clause about the entity becomes a subject-less sentence."""
    return _RELATIVE.sub(lambda m: ". " + m.group("verb").capitalize(), description)


def memory_subject(text: str | None) -> str | None:
    """The person a stored memory names as its subject, or None when it names no one.

    "Tom Becker lives in Paris" and "Tom's time zone is UTC+1" name Tom (Becker); CrewAI's
    entity lines ("Mia Lopez(Person): ...") name their entity. "User lives in Berlin", "Lives in
    Berlin", "I live in Berlin" and "She lives in Berlin" name no one: they are about the user.
    Whether a named person *is* the user is for the store to say (its name memories).
    """
    if not text:
        return None
    t = text.lstrip()
    if "(" in t:
        entity = ENTITY_LINE.match(t)
        if entity is not None:
            return " ".join(entity.group("name").split()) or None
    if not t[:1].isupper():
        return None
    m = _NAMED_SUBJECT.match(t) or _NAMED_POSSESSIVE.match(t)
    if m is None:
        return None
    name = re.match(rf"{_NAME}", t)
    if name is None or name.group(0) in ("She", "He"):  # a pronoun: the user
        return None
    return name.group(0)


def unlabel(text: str) -> str:
    """A labelled or entity memory as plain sentences (unchanged when it is neither)."""
    t = text
    if "(" in t:
        entity = ENTITY_LINE.match(t)
        if entity is not None:  # the description is about the entity: read it subject-less
            t = _entity_sentences(t[entity.end() :])
    if ":" in t:
        t = _LABEL.sub(lambda m: f"{m.group('lead')}My {m.group('noun').lower()} is ", t)
    return t


def entity_person(text: str) -> tuple[str, tuple[int, int]] | None:
    """The person a CrewAI entity line names ("Mia Lopez(Person): ...") and its span."""
    if "(" not in text:
        return None
    entity = ENTITY_LINE.match(text)
    if entity is None or entity.group("type").strip().lower() not in PERSON_TYPES:
        return None
    name = " ".join(entity.group("name").split())
    return (name, entity.span("name")) if name else None
