"""Usage errors in one line, and metavars in words (``TEXT``, ``PATH``, ``INTEGER``).

Click and typer print a usage error as a usage line, a hint and a boxed message of four to six
lines, worded by pydantic ("Input should be a valid integer, unable to parse string as an
integer"). memdiag prints what its other input errors print: one line on stderr naming the
option and the value, then exit 2 (README: "Exit codes").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# typer's type labels (`<int>`, `<list[str]>`, `<path>`) as click's help words
_TYPE_WORDS = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "FLOAT",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIR",
}
_LABEL = re.compile(r"<(?:list\[)?([^<>\[\]]+)\]?>(\.\.\.)?")
# pydantic's words for a value that is not of the option's type
_NOT_A = (
    ("valid integer", "an integer"),
    ("valid number", "a number"),
    ("valid float", "a number"),
    ("valid boolean", "true or false"),
)


def metavar(label: str | None) -> str | None:
    """typer's ``<int>`` / ``<list[str]>`` / ``<table|json|jsonl>`` as INTEGER / TEXT /
    [table|json|jsonl]; anything else as given."""
    if not label:
        return label
    m = _LABEL.fullmatch(label)
    if m is None:
        return label
    inner = m.group(1)
    if "|" in inner:
        return f"[{inner}]"
    return _TYPE_WORDS.get(inner, inner.upper())


def usage_words(usage: str) -> str:
    """``{transcript}`` / ``[spec]`` in a usage line as TRANSCRIPT / [SPEC], as click writes."""
    usage = re.sub(r"\{([a-z][\w-]*)\}", lambda m: m.group(1).upper(), usage)
    return re.sub(r"\[([a-z][\w-]*)\]", lambda m: f"[{m.group(1).upper()}]", usage)


def _value_of(param: Any, args: Sequence[str]) -> str | None:
    """The value given to option ``param`` on the command line (the last one), if found."""
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("-")]
    found = None
    for k, a in enumerate(args):
        for o in opts:
            if a == o and k + 1 < len(args):
                found = args[k + 1]
            elif a.startswith(o + "="):
                found = a[len(o) + 1 :]
    return found


def one_line(exc: Any, args: Sequence[str], command: str = "memdiag") -> str:
    """A click usage error as one line: the option, the value given, what it should be."""
    message = str(exc.format_message() if hasattr(exc, "format_message") else exc).strip()
    param = getattr(exc, "param", None)
    hint = None
    if param is not None:
        names = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
        if getattr(param, "param_type_name", "") == "argument":
            hint = str(getattr(param, "name", "")).upper()
        elif names:
            hint = names[0]
    # click: "Invalid value for '--budget': ...", typer/pydantic: "Value error, ..."
    message = re.sub(r"^Invalid value for [^:]+:\s*", "", message)
    message = re.sub(r"^Value error,\s*", "", message)
    value = _value_of(param, args) if param is not None else None
    for words, wanted in _NOT_A:
        if words in message and value is not None:
            message = f"{value!r} is not {wanted}"
            break
    message = message.rstrip(".")
    if type(exc).__name__ == "MissingParameter" and hint:
        kind = "argument" if hint.isupper() else "option"
        message, hint = f"missing {kind} {hint}", None
    if hint and not message.startswith(hint) and hint not in message:
        message = f"{hint}: {message}"
    return f"{message} (see {command} --help)"
