"""The reader toolkit: how every format reader refuses a record, and typed accessors.

A reader checks what it reads with the accessors below (or raises :class:`PathError` itself);
a value of the wrong type or a missing field becomes a ``PathError`` naming the JSON path inside
the record (``[3].mapping.ab12.message.content.parts``). The reader's record loop hands it to
:func:`reject`, which raises the one-line :class:`~memdiag.errors.InputError` naming the file,
the line and the path, or, with ``--skip-invalid``, counts the record as skipped and reports it.

Anything else a reader raises (a ``KeyError``, a ``TypeError``) is a bug in memdiag, not bad
input: :func:`memdiag.transcript.formats.load` lets it through, and the CLI exits 3. How to
write a reader with these: ``docs/adding-a-format.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from memdiag.transcript.model import ReadProblem

T = TypeVar("T")


class Source(Protocol):
    """What :func:`reject` needs of a :class:`memdiag.transcript.source.Source` (which imports
    this module, so it is not imported here)."""

    path: str
    skipped: int
    warnings: list[str]
    problems: list[ReadProblem]

    @property
    def records(self) -> Sequence[tuple[int, Any]]: ...


# what a type is called in an error message
_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "a boolean"}


class PathError(ValueError):
    """A bad value at a JSON path inside a record: ``where`` is the path, ``message`` what is
    wrong with it, ``line`` the line of the file when the raiser knows it.

    ``str()`` is ``where: message`` (``message`` alone at the top of a record). A ValueError, so
    that a reader's ``except ValueError`` around a record also catches it.
    """

    def __init__(self, where: str, message: str, line: int | None = None) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.message = message
        self.line = line


def reject(
    source: Source, skip_invalid: bool, problem: PathError | str, line: int | None = None
) -> None:
    """Refuse one record: raise the InputError ``FILE:LINE: PATH: MESSAGE``; with
    ``skip_invalid``, count the record as skipped, warn, and return (the reader goes on with the
    next record).

    ``problem`` is a :class:`PathError` (or a message); ``line`` is the file's line of the
    record (None when a line cannot be told, inside one JSON document).
    """
    from memdiag.errors import InputError

    if isinstance(problem, PathError) and line is None:
        line = problem.line
    text = str(problem)
    if not skip_invalid:
        raise InputError(text, path=source.path, line=line)
    source.skipped += 1
    at = f"{source.path}:{line}" if line is not None else source.path
    source.warnings.append(f"{at}: skipped: {text}")
    source.problems.append(ReadProblem(text, line))


def step(where: str, key: str | int) -> str:
    """One JSON path step: ``where.key``, ``where[3]``; ``key`` alone at the top."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def type_name(value: Any) -> str:
    """What an error calls the type of ``value`` (JSON's words: object, list, string, ...)."""
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(
        type(value), type(value).__name__
    )


def expect(value: Any, kind: type[T], where: str, what: str = "") -> T:
    """``value`` when it is a ``kind`` (dict, list, str, int, ...), else a PathError at
    ``where``: ``expected a list of turns, got string``. A bool is never an int here."""
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise PathError(
        where, f"expected {what or _NAMES.get(kind, kind.__name__)}, got {type_name(value)}"
    )


def get_dict(
    obj: dict[str, Any], key: str, where: str = "", *, required: bool = False, what: str = ""
) -> dict[str, Any]:
    """``obj[key]`` that must be an object: ``{}`` when missing or null (unless ``required``),
    a PathError at ``where.key`` when it is anything else."""
    value = obj.get(key)
    if value is None and not required:
        return {}
    return expect(value, dict, step(where, key), what or "an object")


def get_list(
    obj: dict[str, Any], key: str, where: str = "", *, required: bool = False, what: str = ""
) -> list[Any]:
    """``obj[key]`` that must be a list: ``[]`` when missing or null (unless ``required``), a
    PathError at ``where.key`` when it is anything else."""
    value = obj.get(key)
    if value is None and not required:
        return []
    return expect(value, list, step(where, key), what or "a list")


def get_str(
    obj: dict[str, Any], key: str, where: str = "", *, required: bool = False, what: str = ""
) -> str | None:
    """``obj[key]`` that must be a string (numbers are read as their text, as ids often are):
    None when missing or null (unless ``required``), a PathError at ``where.key`` otherwise."""
    value = obj.get(key)
    if value is None and not required:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return expect(value, str, step(where, key), what or "a string")


__all__ = ["PathError", "expect", "get_dict", "get_list", "get_str", "reject", "step", "type_name"]


def documents(
    source: Source, accept: Callable[[Any], bool], what: str
) -> list[tuple[str, dict[str, Any]]]:
    """Every record of ``source`` (a JSON array's elements, or one per line) with where it
    stands (``[3]`` or ``line 7``); the first that ``accept`` refuses is a PathError saying it
    is not ``what``."""
    out: list[tuple[str, dict[str, Any]]] = []
    for line, obj in source.records:
        items = list(enumerate(obj)) if isinstance(obj, list) else [(None, obj)]
        for k, doc in items:
            where = f"[{k}]" if k is not None else f"line {line}"
            if not accept(doc):
                raise PathError(where, f"not {what}")
            out.append((where, doc))
    return out
