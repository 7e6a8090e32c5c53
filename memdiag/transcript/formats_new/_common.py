"""Helpers shared by the readers of real-world exports: JSON paths in errors, choosing one
conversation out of many, and dropping the null-filled fields of provider SDKs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memdiag.errors import InputError
from memdiag.transcript.blocks import drop_nulls as drop_nulls  # re-exported
from memdiag.transcript.formats import Source


@dataclass(frozen=True, slots=True)
class Choice:
    """One conversation (or SDK session) that a file holds, as listed to the user."""

    id: str
    title: str = ""
    messages: int = 0
    ts: str | None = None
    unit: str = "message"

    def line(self) -> str:
        parts = [self.id]
        if self.title:
            parts.append(repr(self.title))
        parts.append(f"{self.messages} {self.unit}{'s' if self.messages != 1 else ''}")
        if self.ts:
            parts.append(self.ts)
        return "  " + "  ".join(parts)


class ChoiceNeeded(InputError):
    """A file holds several conversations and none was chosen: exit 2 with the list."""

    def __init__(self, path: str, head: str, flag: str, choices: Sequence[Choice]) -> None:
        self.choices = tuple(choices)
        listing = "\n".join(c.line() for c in self.choices)
        how = "ID or title" if any(c.title for c in self.choices) else "ID"
        super().__init__(
            f"{head}; choose one with {flag} {how} (or {flag} all):\n{listing}", path=path
        )


def choose(path: str, what: str, flag: str, choices: Sequence[Choice], select: str | None) -> int:
    """The index of the chosen conversation: by id, then by exact title, then by a unique
    case-insensitive title prefix; the only one when there is one. Raises ChoiceNeeded."""
    if select is None:
        if len(choices) == 1:
            return 0
        raise ChoiceNeeded(path, f"holds {len(choices)} {what}s", flag, choices)
    for k, c in enumerate(choices):
        if c.id == select:
            return k
    titled = [k for k, c in enumerate(choices) if c.title == select]
    if not titled:
        folded = select.casefold()
        titled = [k for k, c in enumerate(choices) if c.title.casefold().startswith(folded)]
    if len(titled) == 1:
        return titled[0]
    if len(titled) > 1:
        head = f"{len(titled)} {what}s match {select!r}"
        raise ChoiceNeeded(path, head, flag, [choices[k] for k in titled])
    raise ChoiceNeeded(path, f"no {what} is {select!r} among {len(choices)}", flag, choices)


def bad(
    source: Source, skip_invalid: bool, where: str, message: str, line: int | None = None
) -> None:
    """An error at a JSON path inside the file (`[3].mapping.ab12.message.content: ...`);
    with --skip-invalid it is counted and reported instead."""
    text = f"{where}: {message}" if where else message
    if skip_invalid:
        source.skipped += 1
        at = f"{source.path}:{line}" if line is not None else source.path
        source.warnings.append(f"{at}: skipped: {text}")
        return
    raise InputError(text, path=source.path, line=line)


def iso_time(value: Any) -> str | None:
    """An epoch (seconds, as ChatGPT exports write it) or an ISO string → ISO 8601 UTC."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            moment = dt.datetime.fromtimestamp(float(value), tz=dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
        return moment.isoformat().replace("+00:00", "Z")
    if isinstance(value, str) and value:
        return value
    return None


def key(where: str, name: str) -> str:
    """A JSON path step: `.name`, or `["a b"]` when the name is not a plain word."""
    if name.replace("_", "").replace("-", "").isalnum():
        return f"{where}.{name}" if where else name
    return f'{where}["{name}"]'
