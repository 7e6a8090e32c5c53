"""The pieces of ``text.split_sentences_many``'s fast path: texts whose only whitespace is single
spaces and newlines are split with ``str`` methods (docs/engine.md)."""

from __future__ import annotations


def stops(text: str) -> str:
    """``text`` with a newline after each of 。！？； (see ``split_sentences_many``), and a
    space after that newline dropped: the sentence after it starts at the same place."""
    if not text.isascii():
        for stop in "。！？；":
            if stop in text:
                text = text.replace(stop, stop + "\n").replace(stop + "\n ", stop + "\n")
    return text


# every whitespace character (``str.isspace``, which is also what ``\s`` and ``str.split``
# mean) but the space and the newline; the ASCII ones first (a test holds the list complete)
OTHER_SPACES = "\t\x0b\x0c\r\x1c\x1d\x1e\x1f"
OTHER_SPACES_WIDE = (
    OTHER_SPACES + "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def plain(text: str) -> bool:
    """Whether the only whitespace of ``text`` is single spaces and newlines, with no space at
    its edges or beside a newline. Then a sentence boundary is a newline or the space after
    . ! ?, and the text between two boundaries is already a sentence, its whitespace
    collapsed. (One ``in`` per whitespace character: each is a fast scan.)"""
    if text[:1] == " " or text[-1:] == " ":
        return False
    for c in OTHER_SPACES if text.isascii() else OTHER_SPACES_WIDE:
        if c in text:
            return False
    return "  " not in text and " \n" not in text and "\n " not in text


def split_plain(joined: str) -> list[str]:
    """The parts of a ``plain`` text between sentence boundaries (some empty)."""
    return joined.replace(". ", ".\n").replace("! ", "!\n").replace("? ", "?\n").split("\n")


def sentences(parts: list[str], plain: bool = False) -> list[list[str]]:
    """The sentences of each text from the parts of the joined texts (NUL: a text ends);
    ``plain``: the parts of ``plain`` texts, whose whitespace needs no collapsing."""
    out: list[list[str]] = [[]]
    current = out[0]
    for part in parts:
        if part == "\0":
            current = []
            out.append(current)
        elif part:
            if not plain:
                part = " ".join(part.split())
                if not part:
                    continue
            current.append(part)
    return out
