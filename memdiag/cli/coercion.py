"""Option values coerced without pydantic, so that a small run starts fast.

Typer 0.2x coerces every parameter of a command through a pydantic ``TypeAdapter``, built when
the command is parsed, even for options left at their default. Importing pydantic and building
about thirty adapters costs some 70 ms per command: more than the replay of a 90-message
transcript. memdiag's options are plain (str, int, float, bool, Path, an Enum, list[str]), so
:mod:`memdiag.cli.command` gives each of them a coercer that takes the ordinary spellings of those
types itself, exactly as typer would, and hands anything else (an unusual spelling, a value that
fails) to typer's own adapter, built then. Errors are therefore typer's own, word for word.

This leans on typer internals (``type_descriptor``, ``_runtime_param``, ``typer._coercion``);
when they are missing (another typer version) nothing changes and typer coerces as usual.
``tests/test_cli_coercion.py`` holds both paths equal, value by value, on generated input.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

# the spellings taken here; pydantic takes more ("1_000", " 12 ", "inf"), which go to typer
_INT = re.compile(r"[+-]?[0-9]{1,18}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,15}(?:\.[0-9]{0,15})?|\.[0-9]{1,15})(?:[eE][+-]?[0-9]{1,2})?")

Leaf = Callable[[Any, Any, Any], Any]  # (value, param, ctx) -> coerced value, or raise _Unusual


class _Unusual(Exception):
    """A value this module does not coerce itself: typer's adapter decides."""


def _leaf(annotation: Any, info: Any) -> Leaf | None:
    """The coercer of one value of ``annotation``, or None when typer's own must do it all."""
    from typer._param_types import coerce_cli_choice, coerce_cli_path

    if getattr(info, "parser", None) is not None:
        return None
    if annotation is str:
        return _text
    if annotation is bool:
        return _flag
    if annotation is int or annotation is float:
        if info.min is not None or info.max is not None:
            return None
        return _integer if annotation is int else _real
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        choices = tuple(annotation)
        sensitive = info.case_sensitive

        def choice(value: Any, param: Any, ctx: Any) -> Any:
            try:
                return coerce_cli_choice(value, choices=choices, case_sensitive=sensitive, ctx=ctx)
            except ValueError:
                raise _Unusual from None  # typer words the error

        return choice
    if isinstance(annotation, type) and issubclass(annotation, Path) and info.path_type is None:

        def path(value: Any, param: Any, ctx: Any) -> Any:
            if isinstance(value, str) and value and "\0" not in value:
                value = annotation(value)
            elif not isinstance(value, annotation):  # a default is a Path already
                raise _Unusual
            return coerce_cli_path(value, info, path_type=annotation, param=param, ctx=ctx)

        return path
    return None


def _text(value: Any, param: Any, ctx: Any) -> Any:
    if type(value) is not str:
        raise _Unusual
    return value


def _flag(value: Any, param: Any, ctx: Any) -> Any:
    if type(value) is not bool:
        raise _Unusual
    return value


def _number(kind: type, spelling: re.Pattern[str]) -> Leaf:
    def coerce(value: Any, param: Any, ctx: Any) -> Any:
        if type(value) is kind:  # a default
            return value
        if type(value) is str and spelling.fullmatch(value):
            return kind(value)
        raise _Unusual

    return coerce


_integer = _number(int, _INT)
_real = _number(float, _FLOAT)


def fast_runtime_param(descriptor: Any) -> Any | None:
    """A runtime param for ``descriptor`` that coerces ordinary values without pydantic, or
    None when this typer has no such layer or the type is not one of memdiag's plain ones."""
    cls = _fast_class()
    if cls is None or getattr(descriptor, "file_annotation", 1) is not None:
        return None
    try:
        annotation = descriptor.annotation
        many = get_origin(annotation) is list
        leaf = _leaf(get_args(annotation)[0] if many else annotation, descriptor.parameter_info)
        return None if leaf is None else cls(descriptor, leaf, many)
    except (AttributeError, TypeError):  # typer's internals moved: its own coercion, as before
        return None


@functools.cache
def _fast_class() -> type | None:
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer._param_types import coerce_cli_choice, coerce_cli_path  # noqa: F401 (_leaf)
    except ImportError:
        return None

    class FastRuntimeParam(RuntimeParam):
        """Coerces ordinary values itself; builds typer's own param for anything else."""

        _fast: tuple[Any, Leaf, bool, list[Any]]  # descriptor, leaf, many, typer's own (built)

        def __init__(self, descriptor: Any, leaf: Leaf, many: bool) -> None:
            super().__init__(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )
            object.__setattr__(self, "_fast", (descriptor, leaf, many, []))

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            descriptor, leaf, many, own = self._fast
            try:
                if many:
                    items = value if isinstance(value, (list, tuple)) else [value]
                    return [leaf(v, param, ctx) for v in items]
                return leaf(value, param, ctx)
            except _Unusual:
                if not own:
                    own.append(build_runtime_param(descriptor))
                return own[0]._coerce_value(value, param=param, ctx=ctx)

    return FastRuntimeParam
