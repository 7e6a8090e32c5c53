"""A small MessagePack decoder: what LangGraph checkpoint databases need, and nothing else.

LangGraph's savers (``JsonPlusSerializer``) store checkpoints as MessagePack with extension
types for the objects inside (a LangChain message is ``Ext(5, msgpack([module, class,
model_dump, method]))``). memdiag only reads them, so it decodes here rather than depend on the
``msgpack`` package for ~100 lines of the format's specification (msgpack.org/spec), and it
never imports or calls the classes that the data names (LangGraph's own decoder does).

Decoding is bounded: nesting depth, and no length may claim more than the bytes left (a corrupt
blob fails at once instead of allocating a huge list). Errors are ``ValueError`` naming the
byte offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 100


@dataclass(frozen=True, slots=True)
class Ext:
    """An extension value: its type code and undecoded bytes."""

    code: int
    data: bytes


_FIXED = {  # first byte → (struct format, size) of a number
    0xCA: (">f", 4),
    0xCB: (">d", 8),
    0xCC: (">B", 1),
    0xCD: (">H", 2),
    0xCE: (">I", 4),
    0xCF: (">Q", 8),
    0xD0: (">b", 1),
    0xD1: (">h", 2),
    0xD2: (">i", 4),
    0xD3: (">q", 8),
}
_LENGTH = {1: ">B", 2: ">H", 4: ">I"}
_FIXEXT = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.pos:
            raise ValueError(
                f"msgpack: {n} bytes wanted at byte {self.pos}, {len(self.data) - self.pos} left "
                "(truncated or corrupt)"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def length(self, size: int) -> int:
        value: int = struct.unpack(_LENGTH[size], self.take(size))[0]
        return value

    def count(self, n: int) -> int:
        # every element takes at least one byte: a count beyond the bytes left is corrupt
        if n > len(self.data) - self.pos:
            raise ValueError(f"msgpack: {n} elements claimed at byte {self.pos}: corrupt")
        return n

    def text(self, n: int) -> str:
        at = self.pos
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"msgpack: invalid UTF-8 in the string at byte {at}") from None

    def value(self, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise ValueError(f"msgpack: nested deeper than {MAX_DEPTH} at byte {self.pos}")
        at = self.pos
        b = self.take(1)[0]
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0xA0 <= b <= 0xBF:
            return self.text(b & 0x1F)
        if 0x90 <= b <= 0x9F:
            return self.array(b & 0x0F, depth)
        if 0x80 <= b <= 0x8F:
            return self.map(b & 0x0F, depth)
        if b == 0xC0:
            return None
        if b in (0xC2, 0xC3):
            return b == 0xC3
        if b in _FIXED:
            fmt, size = _FIXED[b]
            return struct.unpack(fmt, self.take(size))[0]
        if b in (0xD9, 0xDA, 0xDB):
            return self.text(self.length(1 << (b - 0xD9)))
        if b in (0xC4, 0xC5, 0xC6):
            return self.take(self.length(1 << (b - 0xC4)))
        if b in (0xDC, 0xDD):
            return self.array(self.length(2 if b == 0xDC else 4), depth)
        if b in (0xDE, 0xDF):
            return self.map(self.length(2 if b == 0xDE else 4), depth)
        if b in _FIXEXT:
            code = struct.unpack(">b", self.take(1))[0]
            return Ext(code, self.take(_FIXEXT[b]))
        if b in (0xC7, 0xC8, 0xC9):
            n = self.length(1 << (b - 0xC7))
            code = struct.unpack(">b", self.take(1))[0]
            return Ext(code, self.take(n))
        raise ValueError(f"msgpack: invalid byte 0x{b:02x} at byte {at}")

    def array(self, n: int, depth: int) -> list[Any]:
        return [self.value(depth + 1) for _ in range(self.count(n))]

    def map(self, n: int, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for _ in range(self.count(n)):
            at = self.pos
            key = self.value(depth + 1)
            if isinstance(key, list):  # a tuple key, packed as an array
                key = tuple(key)
            value = self.value(depth + 1)
            try:
                out[key] = value
            except TypeError:
                raise ValueError(f"msgpack: a map key that cannot be a key at byte {at}") from None
        return out


def unpack(data: bytes) -> Any:
    """The one value that ``data`` holds (extension values as :class:`Ext`)."""
    reader = _Reader(bytes(data))
    value = reader.value()
    if reader.pos != len(reader.data):
        raise ValueError(f"msgpack: {len(reader.data) - reader.pos} bytes after the value")
    return value
