"""Safe YAML loading that remembers line numbers, and dataclass validation that names them.

Used by the config file and by `memdiag check` spec files so that every error can say
``file:line: unknown key 'kep'``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

from memdiag.errors import InputError
from memdiag.fileio import MAX_INT_DIGITS, LimitError, clip, read_text, sanitize

MAX_YAML_BYTES = 16 * 1024 * 1024  # configs, check specs and rules files are small
YAML_MAX_DEPTH = 100  # PyYAML composes and constructs recursively: stay far from the stack limit
MAX_YAML_VALUES = 1_000_000  # values after expanding aliases

T = TypeVar("T")


class LineDict(dict):
    """A mapping from YAML that knows the line of itself and of each key (1-based)."""

    line: int = 0
    key_lines: dict[Any, int]

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


class LineList(list):
    line: int = 0
    item_lines: list[int]


def _base_loader() -> Any:
    """libyaml's parser when PyYAML has it (the pure-Python scanner reads a 300 kB value in
    seconds), else the pure-Python one; both with the safe constructors."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _loader() -> type:
    import yaml

    class Loader(_base_loader()):  # type: ignore[misc]
        pass

    def construct_mapping(loader: Any, node: Any) -> LineDict:
        loader.flatten_mapping(node)
        out = LineDict()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "unhashable key", key_node.start_mark
                ) from None
            if key in out:
                # PyYAML would silently keep the last one; a repeated key is almost always a slip
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            out[key] = loader.construct_object(value_node, deep=True)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out

    def construct_sequence(loader: Any, node: Any) -> LineList:
        out = LineList(loader.construct_object(n, deep=True) for n in node.value)
        out.line = node.start_mark.line + 1
        out.item_lines = [n.start_mark.line + 1 for n in node.value]
        return out

    def construct_int(loader: Any, node: Any) -> int:
        if len(str(node.value)) > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"an integer of {len(node.value)} digits (at most {MAX_INT_DIGITS})",
                node.start_mark,
            )
        return int(yaml.SafeLoader.construct_yaml_int(loader, node))

    def construct_float(loader: Any, node: Any) -> float:
        value = float(yaml.SafeLoader.construct_yaml_float(loader, node))
        if math.isinf(value) or math.isnan(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"number out of range: {clip(node.value, 20)}", node.start_mark
            )
        return value

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, construct_sequence)
    Loader.add_constructor("tag:yaml.org,2002:int", construct_int)
    Loader.add_constructor("tag:yaml.org,2002:float", construct_float)
    return Loader


def _check_depth(text: str, name: str) -> None:
    """Refuse nesting deeper than YAML_MAX_DEPTH before composing (PyYAML recurses per level).

    The event parser is a state machine, not recursive, so this walk is safe at any depth.
    """
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=_base_loader()):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > YAML_MAX_DEPTH:
                raise InputError(
                    f"nested deeper than {YAML_MAX_DEPTH} levels",
                    path=name,
                    line=event.start_mark.line + 1,
                )
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def load_yaml(path: str | Path, what: str = "YAML file") -> Any:
    """Load a YAML file with the safe loader; errors are InputError with file and line.

    Bounded like every input (:mod:`memdiag.fileio`): a regular file of at most
    ``MAX_YAML_BYTES``, nesting, integer digits and expanded aliases limited, no infinite
    numbers, lone surrogates replaced.
    """
    import yaml

    name = clip(str(path), 200)
    text = read_text(path, MAX_YAML_BYTES, what)
    try:
        _check_depth(text, name)
        data = yaml.load(text, Loader=_loader())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        if "nesting depth" in str(exc.problem):  # PyYAML ≥ 6.0.4 has a depth limit of its own
            raise InputError(
                f"nested deeper than {YAML_MAX_DEPTH} levels", path=name, line=line
            ) from None
        problem = clip(exc.problem or exc, 160)
        raise InputError(f"invalid YAML: {problem}", path=name, line=line) from None
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {clip(exc, 160)}", path=name) from None
    except RecursionError:  # _check_depth makes this unreachable; kept as a last guard
        raise InputError(f"nested deeper than {YAML_MAX_DEPTH} levels", path=name) from None
    try:
        return sanitize(data, max_nodes=MAX_YAML_VALUES)
    except LimitError as exc:
        raise InputError(str(exc), path=name, line=line_of(exc.node)) from None


def load_yaml_shipped(path: str | Path) -> Any:
    """A YAML file memdiag ships, as plain data (no line numbers), parsed once per content.

    Parsing the built-in rules costs a small run more than replaying it, so the parsed data is
    kept as ``marshal`` data in the user cache, keyed by the file's hash; when the cache is
    missing, stale, corrupt or unwritable, the file is parsed as usual.
    """
    import contextlib
    import hashlib
    import marshal

    from memdiag import usercache

    raw = Path(path).read_bytes()
    digest = hashlib.sha256(raw).digest()
    entry = usercache.entry("yaml", f"{Path(path).stem}-{digest.hex()[:16]}")
    if entry is not None:
        payload = usercache.read_checked(entry, digest)
        if payload is not None:
            try:
                return marshal.loads(payload)
            except (ValueError, EOFError, TypeError):
                pass
    data = load_yaml(path)
    if entry is not None:
        # a type marshal cannot hold (e.g. a date) leaves the file parsed every time
        with contextlib.suppress(ValueError):
            usercache.write_checked(entry, digest, marshal.dumps(_plain(data)))
    return data


def _plain(data: Any) -> Any:
    """LineDict/LineList → dict/list (marshal holds exact built-in types only)."""
    if isinstance(data, dict):
        return {k: _plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data


def line_of(obj: Any, key: Any = None) -> int | None:
    if isinstance(obj, LineDict):
        return obj.line_of(key) if key is not None else obj.line
    if isinstance(obj, LineList):
        return obj.line
    return None


def unknown_key_error(key: Any, allowed: list[str], path: str, line: int | None) -> InputError:
    hint = difflib.get_close_matches(str(key)[:100], allowed, n=1)
    suggestion = (
        f" (did you mean {hint[0]!r}?)" if hint else f"; expected one of: {', '.join(allowed)}"
    )
    return InputError(f"unknown key {clip(repr(key))}{suggestion}", path=path, line=line)


def to_dataclass(cls: type[T], data: Any, path: str, where: str = "", line: int | None = None) -> T:
    """Build dataclass ``cls`` from a YAML mapping, checking keys and types with line numbers."""
    hints, names, required = _shape(cls)  # type: ignore[arg-type]
    if data is None and not required:
        return cls()
    if data is None:  # `- null` in a list of rules, a bare `defaults:`
        raise InputError(
            f"{where or 'top level'} must be a mapping with {required[0]!r}, got nothing",
            path=path,
            line=line,
        )
    if not isinstance(data, dict):
        raise InputError(
            f"{where or 'top level'} must be a mapping, got {kind_of(data)}",
            path=path,
            line=line_of(data) or line,
        )
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        line = line_of(data, key)
        if key not in names:
            raise unknown_key_error(key, names, path, line)
        label = f"{where}.{key}" if where else str(key)
        kwargs[key] = _coerce(hints[key], value, path, line, label)
    missing = [name for name in required if name not in kwargs]
    if missing:
        what = f"{where} " if where else ""
        raise InputError(f"{what}needs key {missing[0]!r}", path=path, line=line_of(data))
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:  # a dataclass's own checks (__post_init__)
        raise InputError(
            f"{where or 'top level'}: {clip(exc, 160)}", path=path, line=line_of(data)
        ) from None


@functools.cache
def _shape(cls: type) -> tuple[dict[str, Any], list[str], list[str]]:
    """A dataclass's field types, field names and required names (resolved once per class)."""
    fields = dataclasses.fields(cls)
    required = [
        f.name
        for f in fields
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    return typing.get_type_hints(cls), [f.name for f in fields], required


def _coerce(tp: Any, value: Any, path: str, line: int | None, label: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value, path, line, label)
            except InputError as exc:
                errors.append(exc)
        raise errors[0]
    if dataclasses.is_dataclass(tp):
        return to_dataclass(tp, value, path, label, line)  # type: ignore[arg-type]
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise InputError(f"{label} must be a list, got {kind_of(value)}", path=path, line=line)
        (item,) = typing.get_args(tp)[:1] or (Any,)
        lines = getattr(value, "item_lines", [])
        items = [
            _coerce(item, v, path, lines[k] if k < len(lines) else line, f"{label}[{k}]")
            for k, v in enumerate(value)
        ]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise InputError(
                f"{label} must be a mapping, got {kind_of(value)}", path=path, line=line
            )
        return dict(value)
    if tp is Any:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, bool):
        raise InputError(f"{label} must be an integer, got a boolean", path=path, line=line)
    if isinstance(tp, type) and not isinstance(value, tp):
        raise InputError(
            f"{label} must be {_NAMES.get(tp, tp.__name__)}, got {kind_of(value)}",
            path=path,
            line=line,
        )
    return value


_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def kind_of(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return {int: "an integer", float: "a number", str: "a string"}.get(
        type(value), type(value).__name__
    )
