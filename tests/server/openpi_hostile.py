"""Hostile openpi frames (issue 33): each family, how to build it and the refusal it must get. Shared by the codec's
tests (tests/server/test_openpi_bounds.py) and the live endpoint's (tests/server/test_openpi_fuzz.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgpack
import numpy as np

from vlash.server.openpi_codec import MAX_DEPTH, MAX_ITEMS, MAX_OBJECTS, MAX_STR_BYTES

MIB = 1024 * 1024
JOINT = "observation/joint_position"  # a DROID state key: its value is what the mapping turns into an array


def _array32(count: int, item: bytes) -> bytes:
    """A msgpack array header for `count` items, then `count` copies of the packed `item`."""
    return b"\xdd" + count.to_bytes(4, "big") + item * count


def _many_keys(count: int) -> bytes:
    """A map of `count` distinct 4-letter str keys (up to 2**20), each -> 0: built with numpy, not key by key."""
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz012345", np.uint8)
    digits = (np.arange(count)[:, None] >> np.array([15, 10, 5, 0])) & 31
    entries = np.empty((count, 6), np.uint8)
    entries[:, 0], entries[:, 1:5], entries[:, 5] = 0xA4, letters[digits], 0x00  # fixstr of 4, the key, 0
    return b"\xdf" + count.to_bytes(4, "big") + entries.tobytes()


def _field(key: str, packed_value: bytes) -> bytes:
    """{key: value} with the value already packed."""
    return b"\x81" + msgpack.packb(key) + packed_value


@dataclass(frozen=True)
class Hostile:
    build: Callable[[], bytes]  # the frame (built on demand: some are 16 MiB)
    refusal: str  # a regex the error reply matches
    decodes: bool = False  # True: msgpack's own bounds refuse it, while decoding; else the frame is never decoded


HOSTILE = {
    # ~16 MiB, under the 64 MiB frame limit: once 11-16 s holding the GIL and +1.4 GB to decode
    "16-mib-of-empty-lists": Hostile(lambda: _array32(16 * MIB, b"\x90"), rf"a list of {16 * MIB} items"),
    "a-field-of-16-mib-of-empty-lists": Hostile(
        lambda: _field(JOINT, _array32(16 * MIB, b"\x90")), rf"a list of {16 * MIB} items"
    ),
    # every list short, their elements many: a field of 1000 x 1000 zeros (1 MB)
    "a-field-of-nested-lists": Hostile(
        lambda: _field(JOINT, msgpack.packb([[0] * 1000] * 1000)), rf"a list holds more than {MAX_ITEMS} items"
    ),
    # once a RecursionError in openpi_mapping.flatten
    "a-map-995-deep": Hostile(lambda: b"\x81\xa1k" * 995 + b"\xc0", f"nested deeper than {MAX_DEPTH} levels"),
    "a-list-5000-deep": Hostile(lambda: b"\x91" * 5000 + b"\xc0", f"nested deeper than {MAX_DEPTH} levels"),
    # once an 11.5 MB unknown-keys error
    "2**20-keys": Hostile(lambda: _many_keys(2**20), rf"a map of {2**20} entries"),
    # maps within bounds each, too many of them together
    "many-small-maps": Hostile(
        lambda: msgpack.packb({f"m{i}": {f"k{j}": 0 for j in range(64)} for i in range(256)}),
        f"more than {MAX_OBJECTS} msgpack objects",
    ),
    "a-long-string": Hostile(lambda: _field("prompt", msgpack.packb("x" * (MAX_STR_BYTES + 1))), "max_str_len", True),
    "an-ext-type": Hostile(lambda: _field(JOINT, msgpack.packb(msgpack.ExtType(5, b"abcd"))), "max_ext_len", True),
}
