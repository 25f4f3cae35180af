"""openpi's websocket wire format: msgpack with numpy arrays as maps (`openpi_client.msgpack_numpy`).

An ndarray travels as a map with BINARY (msgpack bin) keys, in this order:
    {b"__ndarray__": True, b"data": <raw C-order bytes>, b"dtype": "<f4" (numpy dtype.str), b"shape": [dims]}
and a numpy scalar (np.float32, np.uint8, np.bool_, ...) as {b"__npgeneric__": True, b"data": value, b"dtype": str}.
Everything else is plain msgpack (str keys, lists, floats). Written here from that format, not imported: the
openpi-client package is not a vlash dependency (it pins numpy<2). No pickle. msgspec packs and unpacks (in C),
byte for byte as openpi's msgpack does.

Decoding is stricter than openpi's: only bool, int, uint, float, bytes and str dtypes (openpi refuses object,
void and complex), the data length must match shape x itemsize, and every dim is bounded, not only their product:
the dims with each 0 counted as 1 describe at most MAX_BIN_BYTES (so [0, 2**64 - 1] is refused, not reshaped).
Decoded arrays are read-only views.

A received frame is hostile until checked, and every length in it is bounded. Before anything is decoded, its
structure is walked (headers only, iteratively, no object built: `check_structure`) and held to the bounds below:
items per list or map, nesting, objects in all, and items per list with everything nested in it (the element count of
one observation field). So a frame out of bounds fails in milliseconds: decoding holds the GIL, and a 16 MiB list of
empty lists once took 11-16 s and 1.4 GB, stalling every client. Then `decode_frame` decodes it and holds every str
(keys included) to MAX_STR_BYTES and every bin to MAX_BIN_BYTES; an ext type is refused as it is met.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import numpy as np

from robot_io.protocol import Limits

ALLOWED_KINDS = "biufSU"  # bool, int, uint, float, bytes, str
MAX_DIMS = 32  # numpy's own limit is 64; no observation comes close
# --- a frame's bounds. The ZeroMQ protocol's limits (robot_io.protocol.limits) where one applies:
PROTOCOL_LIMITS = Limits()
# items of one list or map, and of one list with everything nested in it: the longest list a valid observation
# holds is a state vector (its elements: one observation field)
MAX_ITEMS = PROTOCOL_LIMITS.max_state_dim
MAX_STR_BYTES = 4 * PROTOCOL_LIMITS.max_prompt_chars  # one str: the longest prompt in UTF-8 (keys, dtypes: shorter)
MAX_BIN_BYTES = PROTOCOL_LIMITS.max_frame_bytes  # one bin: an array's data, as one ZeroMQ array frame
MAX_DEPTH = 8  # levels of maps and lists; a valid observation has 4 (map > map > ndarray map > shape list)
MAX_OBJECTS = 8 * MAX_ITEMS  # msgpack objects in one frame, keys included; a valid observation has a few dozen
PLAIN = (type(None), bool, int, float)  # decoded values with no length to bound
SHORT_STR_CHARS = MAX_STR_BYTES // 4  # a str of at most this many chars is at most MAX_STR_BYTES in UTF-8
PACKED_AS_BASE = (float, int, str, bytes)  # msgpack packs their subclasses (np.float64, np.str_) as the base type


class CodecError(ValueError):
    """A frame that is not openpi msgpack-numpy, or an array this codec refuses."""


def _check_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind not in ALLOWED_KINDS or dtype.itemsize == 0:
        raise CodecError(f"unsupported dtype: {dtype} (kind {dtype.kind!r}; allowed kinds {ALLOWED_KINDS!r})")
    return dtype


def _pack(obj: Any) -> Any:
    """What msgspec cannot pack itself, as openpi's msgpack packs it."""
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype)
        return {b"__ndarray__": True, b"data": _data(obj), b"dtype": obj.dtype.str, b"shape": obj.shape}
    for base in PACKED_AS_BASE:
        if isinstance(obj, base):
            return base(obj)
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype)
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise CodecError(f"cannot encode {type(obj).__name__}")


def _data(array: np.ndarray) -> memoryview | bytes:
    """An array's raw C-order bytes: a view of a C-contiguous array (msgspec copies it once, into the frame)."""
    return array.reshape(-1).view(np.uint8).data if array.flags.c_contiguous else array.tobytes()


ENCODER = msgspec.msgpack.Encoder(enc_hook=_pack)


def packb(obj: Any) -> bytes:
    """One frame: `obj` as openpi packs it (maps, lists, str, numbers, bytes, ndarrays, numpy scalars)."""
    return ENCODER.encode(obj)


def _dtype(value: Any) -> np.dtype:
    if not isinstance(value, str):
        raise CodecError(f"dtype must be a str like '<f4', got {type(value).__name__}")
    dtype = KNOWN_DTYPES.get(value)
    if dtype is None:
        try:
            dtype = np.dtype(value)
        except (TypeError, ValueError, SyntaxError) as exc:  # numpy parses "f4,(2" as Python: SyntaxError
            raise CodecError(f"not a numpy dtype: {value[:32]!r}") from exc
        _check_dtype(dtype)
        if len(KNOWN_DTYPES) < 64:
            KNOWN_DTYPES[value] = dtype
    return dtype


KNOWN_DTYPES: dict[str, np.dtype] = {}  # dtype strs seen and accepted (a robot sends the same few every time)


def _array(obj: dict) -> np.ndarray:
    dtype, data, shape = _dtype(obj.get(b"dtype")), obj.get(b"data"), obj.get(b"shape")
    if not isinstance(data, bytes):
        raise CodecError(f"ndarray data must be bytes, got {type(data).__name__}")
    if type(shape) is not list or len(shape) > MAX_DIMS or not all(type(d) is int and d >= 0 for d in shape):
        raise CodecError(f"ndarray shape must be a list of at most {MAX_DIMS} ints >= 0, got {shape!r:.80}")
    if math.prod(max(dim, 1) for dim in shape) * dtype.itemsize > MAX_BIN_BYTES:  # each dim, not only the product
        raise CodecError(f"ndarray shape {shape!r:.80}: its dims (a 0 as 1) describe over {MAX_BIN_BYTES} bytes")
    size = math.prod(shape) * dtype.itemsize
    if len(data) != size:
        raise CodecError(f"ndarray {dtype.str} {shape}: needs {size} bytes, got {len(data)}")
    return np.frombuffer(data, dtype).reshape(shape)


def _scalar(obj: dict) -> np.generic:
    dtype, data = _dtype(obj.get(b"dtype")), obj.get(b"data")
    if isinstance(data, dict | list) or data is None:
        raise CodecError(f"numpy scalar data must be a number, str or bytes, got {type(data).__name__}")
    try:
        return dtype.type(data)
    except (TypeError, ValueError, OverflowError) as exc:
        raise CodecError(f"numpy scalar {dtype.str}: {exc}") from exc


def _refuse_ext(code: int, data: memoryview) -> Any:
    raise CodecError("frame out of bounds: an ext type (max_ext_len 0: openpi sends none)")


UNTYPED = msgspec.msgpack.Decoder(ext_hook=_refuse_ext)  # maps, lists, str, bin, numbers: as msgpack decodes them


def unpackb(frame: bytes) -> Any:
    """Decode one frame; raises CodecError (never another exception type) when it is not valid or out of bounds."""
    check_structure(frame)
    return decode_frame(frame)


def decode_frame(frame: bytes) -> Any:
    """A frame whose structure is within bounds (`check_structure`), decoded: CodecError if it is not msgpack, holds
    a str or bin past its bound or an ext type, or an array or numpy scalar map this codec refuses."""
    try:
        decoded = UNTYPED.decode(frame)
    except CodecError:
        raise
    except Exception as exc:  # msgspec's DecodeError, UnicodeDecodeError, RecursionError...
        raise CodecError(f"not a msgpack frame: {type(exc).__name__}: {exc}") from None
    if type(decoded) is dict or type(decoded) is list:
        return _restored(decoded)
    _check_leaf(decoded)
    return decoded


def _restored(obj: dict | list) -> Any:
    """A map or list with every str and bin length checked and its ndarray and numpy scalar maps made numpy objects
    again, inner maps first (as msgpack's object_hook). The recursion is bounded: check_structure held it to
    MAX_DEPTH. Most values are short: only a long one costs a call."""
    if type(obj) is dict:
        for key in obj:
            if type(key) is str:
                if len(key) > SHORT_STR_CHARS:
                    _check_leaf(key)
            elif type(key) is not bytes:
                raise CodecError(f"not a msgpack frame: a map key of type {type(key).__name__} (str or bytes only)")
        for key, value in obj.items():
            kind = type(value)
            if kind is dict or kind is list:
                obj[key] = _restored(value)
            elif kind not in PLAIN and (kind is not str or len(value) > SHORT_STR_CHARS):
                _check_leaf(value)
        if b"__ndarray__" in obj:
            return _array(obj)
        return _scalar(obj) if b"__npgeneric__" in obj else obj
    for i, value in enumerate(obj):
        kind = type(value)
        if kind is dict or kind is list:
            obj[i] = _restored(value)
        elif kind not in PLAIN and (kind is not str or len(value) > SHORT_STR_CHARS):
            _check_leaf(value)
    return obj


def _check_leaf(value: Any) -> None:
    """A str within MAX_STR_BYTES, a bin within MAX_BIN_BYTES; anything else msgspec decodes but a plain number, bool
    or nil is an ext type (a timestamp: msgspec decodes it itself)."""
    if type(value) is str:
        if len(value) > SHORT_STR_CHARS and len(value.encode()) > MAX_STR_BYTES:
            raise CodecError(f"frame out of bounds: a str of {len(value.encode())} bytes (max_str_len {MAX_STR_BYTES})")
    elif type(value) is bytes:
        if len(value) > MAX_BIN_BYTES:
            raise CodecError(f"frame out of bounds: a bin of {len(value)} bytes (max_bin_len {MAX_BIN_BYTES})")
    elif type(value) not in PLAIN:
        raise CodecError("frame out of bounds: an ext type (max_ext_len 0: openpi sends none)")


# A msgpack header by its first byte: (kind, bytes of its length field, fixed bytes after that, the count a fix*
# type carries). A scalar's payload is its length (str, bin, ext) or its fixed bytes; a container's count, its items.
_SCALAR, _LIST, _MAP = 0, 1, 2
Header = tuple[int, int, int, int]


def _header_table() -> list[Header | None]:
    """The msgpack spec's first-byte table; None: 0xc1, which msgpack never uses."""
    table: list[Header | None] = [None] * 256
    for byte in range(256):
        if byte <= 0x7F or byte >= 0xE0 or byte in (0xC0, 0xC2, 0xC3):  # fixint, nil, bool
            table[byte] = (_SCALAR, 0, 0, 0)
        elif byte <= 0x9F:
            table[byte] = (_MAP if byte <= 0x8F else _LIST, 0, 0, byte & 0x0F)  # fixmap, fixarray
        elif byte <= 0xBF:
            table[byte] = (_SCALAR, 0, 0, byte & 0x1F)  # fixstr
    for i in range(5):
        table[0xD4 + i] = (_SCALAR, 0, 1 + (1 << i), 0)  # fixext 1..16: type, data
    for i in range(4):
        table[0xCC + i] = table[0xD0 + i] = (_SCALAR, 0, 1 << i, 0)  # uint, int 8..64
    for i in range(3):
        table[0xC4 + i] = table[0xD9 + i] = (_SCALAR, 1 << i, 0, 0)  # bin, str 8/16/32
        table[0xC7 + i] = (_SCALAR, 1 << i, 1, 0)  # ext 8/16/32: length, type, data
    table[0xCA], table[0xCB] = (_SCALAR, 0, 4, 0), (_SCALAR, 0, 8, 0)  # float 32, 64
    table[0xDC], table[0xDD] = (_LIST, 2, 0, 0), (_LIST, 4, 0, 0)
    table[0xDE], table[0xDF] = (_MAP, 2, 0, 0), (_MAP, 4, 0, 0)
    return table


_HEADERS = _header_table()


def check_structure(frame: bytes) -> None:
    """Raise CodecError when `frame` breaks a structural bound (MAX_ITEMS, MAX_DEPTH, MAX_OBJECTS); reads headers
    only, iteratively, and stops at the first break, so any frame is checked in at most MAX_OBJECTS steps. Bytes
    that are not msgpack end the walk: msgpack refuses them, after what was checked up to there."""
    pos, end = 0, len(frame)
    pending = [1]  # objects still to read at each open level; the frame is one object
    objects = list_level = list_items = 0  # list_level: len(pending) inside the outermost open list (0: none)
    while pending:
        if not pending[-1]:
            pending.pop()
            if len(pending) < list_level:
                list_level = 0
            continue
        header = _HEADERS[frame[pos]] if pos < end else None
        if header is None:
            return  # truncated, or a byte msgpack never uses
        pending[-1] -= 1
        objects += 1
        list_items += 1
        if objects > MAX_OBJECTS:
            raise CodecError(f"frame out of bounds: more than {MAX_OBJECTS} msgpack objects (a valid one has dozens)")
        if list_level and list_items > MAX_ITEMS:
            raise CodecError(f"frame out of bounds: a list holds more than {MAX_ITEMS} items, nested ones included")
        kind, size_bytes, fixed, count = header
        start = pos + 1 + size_bytes
        if size_bytes:
            count = int.from_bytes(frame[pos + 1 : start], "big")
        pos = start + fixed
        if kind == _SCALAR:
            pos += count
            continue
        if count > MAX_ITEMS:
            what = "list of {} items" if kind == _LIST else "map of {} entries"
            raise CodecError(f"frame out of bounds: a {what.format(count)} (at most {MAX_ITEMS})")
        if len(pending) > MAX_DEPTH:
            raise CodecError(f"frame out of bounds: maps and lists nested deeper than {MAX_DEPTH} levels")
        pending.append(count if kind == _LIST else 2 * count)
        if kind == _LIST and not list_level:
            list_level, list_items = len(pending), 0
