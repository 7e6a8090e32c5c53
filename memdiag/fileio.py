"""Every file memdiag reads or writes goes through here: bounded reads, safe writes.

Reading: regular files only (never a device, FIFO or directory), at most ``limit`` bytes (read
with a bound, not trusted from ``st_size``: ``/dev/zero`` reports 0), UTF-8 with a line number on
a bad byte, JSON with a nesting limit, a digit limit on integers and lone surrogates replaced.
Writing: a unique temporary file beside the target (``mkstemp``, never a fixed name that a
planted symlink could redirect), fsync, then ``os.replace``; special files and directories are
refused. Errors are ``InputError`` (exit 2) with one short line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from memdiag.errors import InputError, clip

MAX_DEPTH = 200  # JSON/YAML nesting; real transcripts, configs and stores stay far below
MAX_INT_DIGITS = 4300  # Python's own int-parsing limit (sys.get_int_max_str_digits)
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str, always lone (JSON joins real pairs)


def _os_error(exc: OSError, name: str, doing: str) -> InputError:
    if exc.errno == errno.ENOENT:
        message = "cannot create a file here" if doing == "writing" else "no such file"
        return InputError(message, path=clip(name, 200))
    if exc.errno == errno.ENOSPC:
        return InputError("no space left on the device", path=clip(name, 200))
    if exc.errno == errno.ENAMETOOLONG:
        return InputError("file name too long", path=clip(name, 200))
    if exc.errno in (errno.EACCES, errno.EPERM):
        return InputError(f"permission denied {doing}", path=clip(name, 200))
    if exc.errno == errno.EISDIR:
        return InputError("is a directory, expected a file", path=clip(name, 200))
    reason = exc.strerror or type(exc).__name__
    return InputError(f"cannot {doing.split()[0]} file: {reason}", path=clip(name, 200))


def path_stat(path: str | Path, doing: str = "reading") -> os.stat_result | None:
    """``os.stat`` of a path the user named: None when nothing is there; a name the OS refuses
    (longer than it allows, a symlink loop, no permission) is an InputError of one line.

    ``Path.exists()`` and ``is_file()`` raise on such names instead of answering, so every
    user-named path is looked at through here.
    """
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise _os_error(exc, str(path), doing) from None


def is_dir(path: str | Path) -> bool:
    st = path_stat(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def is_file(path: str | Path) -> bool:
    st = path_stat(path)
    return st is not None and stat.S_ISREG(st.st_mode)


def read_bytes(path: str | Path, limit: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; InputError otherwise."""
    name = str(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _os_error(exc, name, "reading") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"is a directory, expected a {what}", path=name)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"not a regular file, expected a {what}", path=name)
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise _os_error(exc, name, "reading") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise InputError(f"larger than {_size(limit)}, too large for a {what}", path=name)
    return data


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:g} {unit}"
    return f"{n} bytes"


def decode_utf8(data: bytes, name: str, what: str = "file") -> str:
    """UTF-8 text (a BOM is dropped); binary data and bad bytes are InputErrors with a line."""
    if b"\x00" in data[:8192]:
        raise InputError(f"binary file (NUL bytes), expected a UTF-8 {what}", path=name)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", path=name, line=line
        ) from None


def read_text(path: str | Path, limit: int, what: str = "file") -> str:
    """A bounded UTF-8 text file (see :func:`read_bytes` and :func:`decode_utf8`)."""
    return decode_utf8(read_bytes(path, limit, what), str(path), what)


class LimitError(ValueError):
    """Input beyond a structural limit; ``node`` is the container where it was found."""

    def __init__(self, message: str, node: Any = None) -> None:
        super().__init__(message)
        self.node = node


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise LimitError(
            f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})"
        )
    return int(digits)


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise LimitError(f"number out of range: {clip(text, 20)}")
    return value


def _constant(name: str) -> Any:
    raise LimitError(f"{name} is not valid JSON")


# json.loads with these hooks builds a JSONDecoder on every call (a JSON Lines file: one per
# line); the decoder keeps no state between documents, so one serves them all
_JSON_SPACE = " \t\n\r"  # what JSON counts as whitespace (json.decoder.WHITESPACE)
_DECODER = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_constant
)

# a lone surrogate can only come from a \\u escape (decoded UTF-8 holds none) or a str built
# from one; text without either needs no fixing (the common case, and a full walk is slow).
# Two patterns, not one alternation: the escape has a literal prefix the regex engine finds
# by fast search, and only a non-ASCII text can hold a surrogate; one pattern tried both at
# every position, ten times slower on a JSON line that `json.dumps` escaped (ensure_ascii)
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _maybe_surrogate(text: str) -> bool:
    """Whether ``text`` may hold a lone surrogate: a surrogate's escape or a surrogate."""
    return _ESCAPED_SURROGATE.search(text) is not None or (
        not text.isascii() and _SURROGATE.search(text) is not None
    )


def json_loads(text: str, escapes: bool = True) -> Any:
    """``json.loads`` with limits: ValueError for deep nesting, huge integers, NaN/Infinity.

    Lone surrogates (``"\\ud800"``) are replaced by U+FFFD so that no later encode fails.
    ``escapes=False``: the caller knows ``text`` holds neither a ``\\u`` escape nor a lone
    surrogate (a line of a file decoded from UTF-8 in which ``\\u`` never occurs), so they
    are not looked for. Callers turn ValueError (json.JSONDecodeError is one) into an
    InputError naming the file; the limits raise :class:`LimitError`.
    """
    try:
        data = _decode(text)
    except RecursionError:
        raise LimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    if escapes and _maybe_surrogate(text):
        return sanitize(data)
    if text.count("[") + text.count("{") > MAX_DEPTH:  # else it cannot be that deep
        check_depth(data)
    return data


def _decode(text: str) -> Any:
    """What ``json.loads(text, hooks)`` gives or raises. ``raw_decode`` scans the document
    (``decode`` also matches a whitespace regex on each side of it); a text it does not take
    whole (whitespace before, data after, an error) goes to ``json.loads``, for its exact
    answer or error (a property test holds them equal)."""
    if isinstance(text, str):
        try:
            data, end = _DECODER.raw_decode(text)
        except json.JSONDecodeError:
            pass
        else:
            if end == len(text) or not text[end:].strip(_JSON_SPACE):
                return data
    return json.loads(
        text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_constant
    )


def check_depth(data: Any) -> None:
    """LimitError when containers nest deeper than MAX_DEPTH (a level-by-level walk)."""
    level = [data] if isinstance(data, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise LimitError(f"nested deeper than {MAX_DEPTH} levels", level[0])
        below: list[Any] = []
        for node in level:
            values = node.values() if isinstance(node, dict) else node
            below.extend([v for v in values if isinstance(v, (dict, list))])
        level = below


def sanitize(data: Any, max_nodes: int | None = None) -> Any:
    """Check nesting depth (≤ MAX_DEPTH) and replace lone surrogates, without recursion.

    ``max_nodes`` bounds the values visited, counting a shared value each time it is reached:
    YAML aliases can make a small file expand to billions of values ("billion laughs").
    A cycle (a YAML alias inside itself) ends as too deep. Raises :class:`LimitError`.
    """
    if isinstance(data, str):
        return _fix_str(data)
    if not isinstance(data, (dict, list)):
        return data
    stack: list[tuple[Any, int]] = [(data, 1)]
    visited = 0
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise LimitError(f"nested deeper than {MAX_DEPTH} levels", node)
        visited += len(node)
        if max_nodes is not None and visited > max_nodes:
            raise LimitError(f"more than {max_nodes:,} values (aliases expanding?)", node)
        if isinstance(node, dict):
            bad = [k for k in node if isinstance(k, str) and not _clean(k)]
            for k in bad:
                node[_fix_str(k)] = node.pop(k)
            items: Any = node.items()
        else:
            items = enumerate(node)
        for key, value in list(items):
            if isinstance(value, str):
                if not _clean(value):
                    node[key] = _fix_str(value)
            elif isinstance(value, (dict, list)):
                stack.append((value, depth + 1))
    return data


def _clean(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fix_str(text: str) -> str:
    return text if _clean(text) else _SURROGATE.sub("\ufffd", text)


# --- writing -----------------------------------------------------------------------------------


def check_output_path(path: str | Path) -> Path:
    """Refuse, before any work, an output path that cannot take a regular file."""
    out = Path(path)
    name = clip(str(path), 200)
    try:
        st = out.stat()
    except FileNotFoundError:
        parent = out.parent
        pst = path_stat(parent, "writing")
        if pst is not None and not stat.S_ISDIR(pst.st_mode):
            raise InputError("parent is not a directory", path=name) from None
        _check_writable(parent, name)
        return out
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise InputError("parent is not a directory", path=name) from None
        raise _os_error(exc, str(path), "writing") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory; give a file name to write", path=name)
    if not stat.S_ISREG(st.st_mode):
        raise InputError("not a regular file; refusing to replace it", path=name)
    _check_writable(out.parent, name)
    return out


def _check_writable(folder: Path, name: str) -> None:
    """The nearest existing folder must take a new file (the temporary one goes there)."""
    existing = folder
    while path_stat(existing, "writing") is None and existing != existing.parent:
        existing = existing.parent
    if is_dir(existing) and not os.access(existing, os.W_OK | os.X_OK):
        raise InputError("permission denied writing", path=name)


def _new_file_mode(out: Path) -> int:
    try:
        return stat.S_IMODE(out.stat().st_mode)  # replacing a file keeps its mode
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open ``path`` for writing so that it appears whole or not at all.

    Writes go to a fresh ``mkstemp`` file in the target's folder, which is fsynced and then
    replaces ``path`` (``os.replace``) only when the block succeeds; on any failure the
    temporary file is removed and the target is untouched. A directory, a device or another
    special file at ``path`` is refused (InputError), as are unwritable places.
    """
    import tempfile  # only when writing: most runs write no file

    out = check_output_path(path)
    name = clip(str(path), 200)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name[:100]}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise _os_error(exc, str(path), "writing") from None
    with contextlib.suppress(OSError):  # mkstemp makes 0600; give what a plain open() gives
        os.fchmod(fd, _new_file_mode(out))
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as fp:
            yield fp
            fp.flush()
            os.fsync(fp.fileno())
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _os_error(exc, name, "writing") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def shipped_file(*parts: str) -> Iterator[Path]:
    """A data file shipped in the memdiag package (``shipped_file("data", "rules.yaml")``), as a
    path. An installed package is a folder on disk: the file is there, found without
    ``importlib.resources`` (whose readers import ``zipfile``, a few milliseconds of every
    small run). A zipped package goes through ``importlib.resources`` and its temporary copy.
    """
    here = Path(__file__).resolve().parent.joinpath(*parts)
    if here.is_file():
        yield here
        return
    from importlib import resources

    with resources.as_file(resources.files("memdiag").joinpath(*parts)) as path:
        yield path
