"""openpi's websocket wire format: msgpack with numpy arrays as maps (`openpi_client.msgpack_numpy`).

An ndarray travels as a map with BINARY (msgpack bin) keys, in this order:
    {b"__ndarray__": True, b"data": <raw C-order bytes>, b"dtype": "<f4" (numpy dtype.str), b"shape": [dims]}
and a numpy scalar (np.float32, np.uint8, np.bool_, ...) as {b"__npgeneric__": True, b"data": value, b"dtype": str}.
Everything else is plain msgpack (str keys, lists, floats). Written here from that format, not imported: the
openpi-client package is not a vlash dependency (it pins numpy<2). No pickle.

Decoding is stricter than openpi's: only bool, int, uint, float, bytes and str dtypes (openpi refuses object,
void and complex), and the data length must match shape x itemsize. Decoded arrays are read-only views.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np

ALLOWED_KINDS = "biufSU"  # bool, int, uint, float, bytes, str
MAX_DIMS = 32  # numpy's own limit is 64; no observation comes close


class CodecError(ValueError):
    """A frame that is not openpi msgpack-numpy, or an array this codec refuses."""


def _check_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind not in ALLOWED_KINDS or dtype.itemsize == 0:
        raise CodecError(f"unsupported dtype: {dtype} (kind {dtype.kind!r}; allowed kinds {ALLOWED_KINDS!r})")
    return dtype


def _pack(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype)
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype)
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise CodecError(f"cannot encode {type(obj).__name__}")


def packb(obj: Any) -> bytes:
    """One frame: `obj` as openpi packs it (maps, lists, str, numbers, bytes, ndarrays, numpy scalars)."""
    return msgpack.packb(obj, default=_pack, use_bin_type=True)


def _dtype(value: Any) -> np.dtype:
    if not isinstance(value, str):
        raise CodecError(f"dtype must be a str like '<f4', got {type(value).__name__}")
    try:
        return _check_dtype(np.dtype(value))
    except TypeError as exc:
        raise CodecError(f"not a numpy dtype: {value[:32]!r}") from exc


def _array(obj: dict) -> np.ndarray:
    dtype, data, shape = _dtype(obj.get(b"dtype")), obj.get(b"data"), obj.get(b"shape")
    if not isinstance(data, bytes):
        raise CodecError(f"ndarray data must be bytes, got {type(data).__name__}")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or any(type(d) is not int or d < 0 for d in shape):
        raise CodecError(f"ndarray shape must be a list of at most {MAX_DIMS} ints >= 0, got {shape!r:.80}")
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


def _hook(obj: dict) -> Any:
    if b"__ndarray__" in obj:
        return _array(obj)
    if b"__npgeneric__" in obj:
        return _scalar(obj)
    return obj


def unpackb(frame: bytes) -> Any:
    """Decode one frame; raises CodecError (never another exception type) when it is not valid."""
    try:
        return msgpack.unpackb(frame, object_hook=_hook, raw=False)
    except CodecError:
        raise
    except Exception as exc:  # msgpack's ExtraData, FormatError, StackError, UnicodeDecodeError, ValueError...
        raise CodecError(f"not a msgpack frame: {type(exc).__name__}: {exc}") from exc
