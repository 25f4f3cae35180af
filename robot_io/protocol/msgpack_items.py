"""What a msgpack value's first bytes say, without decoding it: its kind, and a map's or a list's entry count; and a
map's entries as msgspec.Raw, in wire order, duplicates kept. These are the bounded reads the refusal path
(refusals.py) and the accept path's duplicate-key check (codec.py) make: none walks a value it does not need.
"""

from __future__ import annotations

from typing import Any

import msgspec

# msgpack's kinds by first byte, after the spec's table (None: 0xc1, which msgpack never uses)
KIND_RANGES = [
    (0x00, 0x7F, "int"), (0x80, 0x8F, "map"), (0x90, 0x9F, "list"), (0xA0, 0xBF, "str"), (0xC0, 0xC0, "nil"),
    (0xC2, 0xC3, "bool"), (0xC4, 0xC6, "bin"), (0xC7, 0xC9, "ext"), (0xCA, 0xCB, "float"), (0xCC, 0xD3, "int"),
    (0xD4, 0xD8, "ext"), (0xD9, 0xDB, "str"), (0xDC, 0xDD, "list"), (0xDE, 0xDF, "map"), (0xE0, 0xFF, "int"),
]  # fmt: skip
KINDS: list[str | None] = [None] * 256
for _first, _last, _kind in KIND_RANGES:
    KINDS[_first : _last + 1] = [_kind] * (_last - _first + 1)
COUNT_BYTES = {0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4}  # list16, list32, map16, map32: the count's bytes after the first
PYTHON_NAMES = {  # a kind as the type a msgpack decoder makes of it (error messages name received values so)
    "map": "dict", "list": "list", "str": "str", "bin": "bytes", "int": "int", "float": "float", "bool": "bool",
    "nil": "NoneType", "ext": "ext", None: "no msgpack value",
}  # fmt: skip
RAW_LIST = msgspec.msgpack.Decoder(list[msgspec.Raw])


def kind(buf: Any) -> str | None:
    """The msgpack kind of the value `buf` (a bytes-like object or a msgspec.Raw) starts with; None when empty."""
    view = memoryview(buf)
    return KINDS[view[0]] if view.nbytes else None


def count(buf: Any) -> tuple[int, int] | None:
    """(entries, bytes of the header) of the map or list `buf` starts with; None when its header is cut short."""
    view = memoryview(buf)
    first = view[0]
    size = COUNT_BYTES.get(first, 0)
    if size == 0:
        return first & 0x0F, 1  # fixmap, fixarray
    if view.nbytes <= size:
        return None
    return int.from_bytes(view[1 : 1 + size], "big"), 1 + size


def map_count(buf: Any) -> int:
    """Entries of the map `buf` holds (the accept path's duplicate-key check: the caller knows `buf` is a map)."""
    found = count(buf)
    return -1 if found is None else found[0]


def entries(buf: Any, n: int, header_bytes: int) -> list[msgspec.Raw]:
    """The 2 x `n` keys and values of the map `buf` holds, each a msgspec.Raw, in wire order (duplicates kept):
    a map's bytes after its header are those of a list of twice its entries. msgspec skips each value in C, building
    nothing inside it; DecodeError (or RecursionError) when the bytes after the map's are not exactly its entries."""
    relisted = b"\xdd" + (2 * n).to_bytes(4, "big")
    return RAW_LIST.decode(b"".join((relisted, memoryview(buf)[header_bytes:])))
