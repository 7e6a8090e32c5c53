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
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from memdiag.errors import InputError

MAX_DEPTH = 200  # JSON/YAML nesting; real transcripts, configs and stores stay far below
MAX_INT_DIGITS = 4300  # Python's own int-parsing limit (sys.get_int_max_str_digits)
SHOWN_CHARS = 80  # how much of an input value an error message quotes
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str, always lone (JSON joins real pairs)


def clip(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr``-free short form of input text for an error line: one line, at most ``limit``."""
    text = " ".join(str(value).split())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


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


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits")
    return int(digits)


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number out of range: {clip(text, 20)}")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_loads(text: str) -> Any:
    """``json.loads`` with limits: ValueError for deep nesting, huge integers, NaN/Infinity.

    Lone surrogates (``"\\ud800"``) are replaced by U+FFFD so that no later encode fails.
    Callers turn ValueError (json.JSONDecodeError is one) into an InputError naming the file.
    """
    try:
        data = json.loads(
            text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_constant
        )
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    return sanitize(data)


def sanitize(data: Any) -> Any:
    """Check nesting depth (≤ MAX_DEPTH) and replace lone surrogates, without recursion."""
    if isinstance(data, str):
        return _fix_str(data)
    if not isinstance(data, (dict, list)):
        return data
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
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
        if parent.exists() and not parent.is_dir():
            raise InputError("parent is not a directory", path=name) from None
        return out
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise InputError("parent is not a directory", path=name) from None
        raise _os_error(exc, str(path), "writing") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory; give a file name to write", path=name)
    if not stat.S_ISREG(st.st_mode):
        raise InputError("not a regular file; refusing to replace it", path=name)
    return out


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
