"""encode / decode: message dataclasses <-> ZeroMQ multipart frames (msgpack header + raw array frames).

decode treats its input as hostile: every size is checked before anything is allocated, the header's
nesting is bounded before anything walks it, and any failure is a MessageError (a ProtocolError) whose
`.code` is the ErrorCode to reply with.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import (
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    Actions,
    Error,
    ErrorCode,
    Hello,
    Infer,
    Message,
    MessageError,
    MessageType,
    Metadata,
    Ping,
    Reset,
    Stats,
)
from robot_io.protocol.schema import BODY_SCHEMAS, bad_message, bad_value, check_fields

DEFAULT_LIMITS = Limits()
HEADER_KEYS = {"v", "type", "body", "arrays"}
IMAGE_PREFIX = "image/"  # an image array is named "image/<camera name>"
WIRE_DTYPES = {"uint8": np.dtype("<u1"), "float32": np.dtype("<f4")}  # little-endian on the wire
DTYPE_NAMES = {"|u1": "uint8", "<f4": "float32", ">f4": "float32"}  # numpy dtype.str -> wire name (fast lookup)
MAX_RANK = 4
# The deepest a valid header nests: header > body > cameras > one camera, or header > arrays > descriptor > shape.
# msgpack itself accepts ~1024 levels; anything that walks the header recursively (repr, ==) would then overflow
# Python's stack, so deeper input is refused right after unpacking, before any other code looks at it.
MAX_HEADER_DEPTH = 4


@dataclass(frozen=True)
class ArrayField:
    """dtype and per-axis [low, high] size bounds of one array field (a str bound names a Limits attribute)."""

    dtype: str
    dims: tuple[tuple[int, int | str], ...]


VECTOR = ArrayField("float32", ((1, "max_state_dim"),))
ROWS = ArrayField("float32", ((0, "max_chunk_length"), (1, "max_action_dim")))
IMAGE = ArrayField("uint8", ((1, "max_image_side"), (1, "max_image_side"), (3, 3)))
ARRAY_FIELDS = {
    MessageType.INFER: {"state": VECTOR, "future_state": VECTOR, "prefix": ROWS, "guidance": ROWS},
    MessageType.ACTIONS: {"actions": ROWS},
}
IMAGE_FIELDS = {MessageType.INFER: IMAGE}  # the message types that carry "image/<camera>" arrays


@dataclass(frozen=True)
class ArrayBounds:
    """An ArrayField with its bounds resolved against one Limits: what decode checks each received array against."""

    dtype: str
    dims: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class ReceivableArrays:
    """The arrays one message type may carry, bounds resolved against one Limits (see `_receivable`)."""

    fields: dict[str, ArrayBounds]  # by array name
    image: ArrayBounds | None  # bounds of every "image/<camera>" array; None where the type carries no images


SIMPLE_MESSAGES = {  # the message types without arrays: built straight from their checked body
    MessageType.HELLO: Hello,
    MessageType.METADATA: Metadata,
    MessageType.ERROR: Error,
    MessageType.PING: Ping,
    MessageType.RESET: Reset,
    MessageType.STATS: Stats,
}
BODY_NAMES = {mtype: f"{mtype.value}.body" for mtype in MessageType}  # prefix of body field names in errors
DESCRIPTOR_KEYS = {"name", "dtype", "shape"}
MAX_NAME_CHARS = 256 + len(IMAGE_PREFIX)
MAX_DIM = 2**31 - 1


def encode(message: Message, limits: Limits = DEFAULT_LIMITS, validate: bool = False) -> list[bytes | memoryview]:
    """Frames to pass to `socket.send_multipart(frames, copy=False)`; arrays are not copied when already
    C-contiguous little-endian. Fields are type-checked here (MessageError); their values and bounds are checked
    by the receiver's `decode`. With `validate`, the frames are decoded once here too, so nothing is sent that the
    receiver would refuse (opt-in: it doubles the codec's work per message)."""
    mtype, body, arrays = _parts(message)
    descriptors, frames = [], []
    for name, value in arrays:
        big_endian = value.dtype.str[0] == ">"
        wire = value.astype(value.dtype.newbyteorder("<")) if big_endian else np.ascontiguousarray(value)
        descriptors.append({"name": name, "dtype": DTYPE_NAMES[value.dtype.str], "shape": list(value.shape)})
        frames.append(_byte_view(wire))
    header = {"v": PROTOCOL_VERSION, "type": mtype.value, "body": body, "arrays": descriptors}
    try:
        packed = msgpack.packb(header, default=_plain_scalar)
    except (TypeError, ValueError, OverflowError) as exc:
        raise bad_value(f"{mtype.value}: cannot pack header: {exc}") from None
    out = [packed, *frames]
    if validate:
        decode(out, limits)
    return out


def check(message: Message, limits: Limits = DEFAULT_LIMITS) -> Message:
    """The checks `decode` makes, on a message made in this process (no bytes: an in-process client's request):
    MessageError naming the first field a receiver would refuse; the message as decode would build it."""
    mtype, body, named = _parts(message)
    body = check_fields(BODY_NAMES[mtype], _plain_body(body), BODY_SCHEMAS[mtype], limits)
    receivable = _receivable(mtype, limits)
    arrays: dict[str, np.ndarray] = {}
    for name, value in named:
        bounds = receivable.image if name.startswith(IMAGE_PREFIX) else receivable.fields.get(name)
        if bounds is None:
            raise bad_message(f"{mtype.value}: unexpected array {name!r}")
        if value.nbytes > limits.max_frame_bytes:
            raise bad_message(f"{name}: {value.nbytes} bytes exceed the limit {limits.max_frame_bytes}")
        _check_bounds(name, DTYPE_NAMES[value.dtype.str], value.shape, bounds)
        if value.dtype.kind == "f" and not _all_finite(value):
            raise bad_value(f"{name}: contains NaN or inf")
        arrays[name] = value
    return _build(mtype, body, arrays, limits)


def _parts(message: Message) -> tuple[MessageType, dict, list[tuple[str, np.ndarray]]]:
    """A message's type, header body and named arrays (their types and dtypes checked: MessageError)."""
    mtype = MESSAGE_TYPES.get(type(message))
    if mtype is None:
        raise bad_message(f"cannot encode {type(message).__name__}: not a protocol message")
    body = {key: getattr(message, key) for key in BODY_SCHEMAS[mtype]}
    if mtype is MessageType.METADATA:
        body["cameras"] = [{"name": c.name, "height": c.height, "width": c.width} for c in message.cameras]
    elif mtype is MessageType.ERROR:
        body["code"] = getattr(message.code, "value", message.code)
    arrays = _named_arrays(message)
    for name, value in arrays:
        if not isinstance(value, np.ndarray):
            raise bad_value(f"{name}: expected numpy array, got {type(value).__name__}")
        spec = IMAGE if name.startswith(IMAGE_PREFIX) else ARRAY_FIELDS[mtype][name]
        if DTYPE_NAMES.get(value.dtype.str) != spec.dtype:
            raise bad_value(f"{name}: expected dtype {spec.dtype}, got {value.dtype.name}")
    return mtype, body, arrays


def _plain_body(body: dict) -> dict:
    """The body as the receiver's msgpack would see it (numpy scalars as Python ones)."""
    return {key: value.item() if isinstance(value, np.generic) else value for key, value in body.items()}


def decode(frames: Sequence[Any], limits: Limits = DEFAULT_LIMITS) -> Message:
    """Parse and validate one multipart message; raises MessageError (with `.code`) on any bad input.

    Frames may be bytes, memoryviews or zmq.Frame objects. Arrays are zero-copy views of the frames:
    read-only when the frame is (bytes, zmq.Frame), so copy an array before writing to it.
    """
    views = _views(frames, limits)
    mtype, header = _unpack_header(views[0], limits)
    body = check_fields(BODY_NAMES[mtype], header["body"], BODY_SCHEMAS[mtype], limits)
    descriptors = header["arrays"]
    if type(descriptors) is not list or len(descriptors) != len(views) - 1:
        raise bad_message(f"arrays: expected a list of {len(views) - 1} descriptors (one per array frame)")
    arrays = _arrays(mtype, descriptors, views[1:], limits)
    return _build(mtype, body, arrays, limits)


def _plain_scalar(value: Any) -> Any:
    if isinstance(value, np.generic):  # numpy scalars in timing_ms / counters
        return value.item()
    raise TypeError(f"cannot serialize {type(value).__name__}")


def _byte_view(array: np.ndarray) -> memoryview:
    """A C-contiguous array's bytes as a flat memoryview, not copied (memoryview cannot cast an empty shape)."""
    return array.data.cast("B") if array.size else memoryview(b"")


def _named_arrays(message: Message) -> list[tuple[str, Any]]:
    if isinstance(message, Actions):
        return [("actions", message.actions)]
    if not isinstance(message, Infer):
        return []
    named = [(key, getattr(message, key)) for key in ARRAY_FIELDS[MessageType.INFER]]
    named = [(key, value) for key, value in named if key == "state" or value is not None]
    if not isinstance(message.images, dict):
        raise bad_value(f"images: expected dict camera -> array, got {type(message.images).__name__}")
    return named + [(f"{IMAGE_PREFIX}{cam}", image) for cam, image in message.images.items()]


def _views(frames: Sequence[Any], limits: Limits) -> list[memoryview]:
    if not isinstance(frames, list | tuple) or not 1 <= len(frames) <= limits.max_frames:
        count = len(frames) if isinstance(frames, list | tuple) else type(frames).__name__
        raise bad_message(f"expected a list of 1..{limits.max_frames} frames, got {count}")
    views, total = [], 0
    for i, frame in enumerate(frames):
        try:
            view = memoryview(frame)
        except TypeError:
            raise bad_message(f"frame {i}: not a buffer ({type(frame).__name__})") from None
        if not view.c_contiguous:
            raise bad_message(f"frame {i}: buffer is not contiguous")
        bound = limits.max_header_bytes if i == 0 else limits.max_frame_bytes
        if view.nbytes > bound:
            raise bad_message(f"frame {i}: {view.nbytes} bytes exceed the limit {bound}")
        total += view.nbytes
        if total > limits.max_message_bytes:
            raise bad_message(f"message: more than {limits.max_message_bytes} bytes (limit on all frames together)")
        if view.ndim != 1 or view.itemsize != 1:
            try:
                view = view.cast("B") if view.nbytes else memoryview(b"")
            except (TypeError, ValueError):
                raise bad_message(f"frame {i}: cannot view buffer as bytes") from None
        views.append(view)
    return views


def _unpack_header(view: memoryview, limits: Limits) -> tuple[MessageType, dict]:
    n = limits.max_header_bytes
    try:  # untrusted bytes: any failure of the parser is a malformed message
        header = msgpack.unpackb(
            view,
            raw=False,
            strict_map_key=True,
            max_str_len=n,
            max_bin_len=n,
            max_array_len=n,
            max_map_len=n,
            max_ext_len=n,
        )
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types on garbage
        raise bad_message(f"header is not valid msgpack: {type(exc).__name__}") from None
    if not _nests_within(header, MAX_HEADER_DEPTH):
        raise bad_message(f"header: nested deeper than {MAX_HEADER_DEPTH} levels")
    if type(header) is not dict:
        raise bad_message(f"header: expected map, got {type(header).__name__}")
    version = header.get("v")
    if type(version) is not int:
        raise bad_message("header: missing or non-int version 'v'")
    if version != PROTOCOL_VERSION:
        supported = f"protocol version {version} is not supported (this end speaks {PROTOCOL_VERSION})"
        raise MessageError(ErrorCode.BAD_VERSION, supported)
    if header.keys() != HEADER_KEYS:
        raise bad_message(f"header: expected keys {sorted(HEADER_KEYS)}, got {sorted(str(k) for k in header)[:16]}")
    kind = header["type"]
    mtype = MessageType._value2member_map_.get(kind) if type(kind) is str else None
    if mtype is None:
        raise bad_message(f"header: unknown message type {_describe(kind)}")
    return mtype, header


def _nests_within(value: Any, levels: int) -> bool:
    """True when `value` has at most `levels` levels of maps / lists (the recursion is bounded by `levels`)."""
    if type(value) is not dict and type(value) is not list:
        return True
    if levels == 0:
        return False
    for child in value.values() if type(value) is dict else value:
        if (type(child) is dict or type(child) is list) and not _nests_within(child, levels - 1):
            return False
    return True


def _describe(value: Any) -> str:
    """A received value for an error message: a str shortened, anything else by type only (never repr'd whole)."""
    return repr(value[:32]) if type(value) is str else type(value).__name__


def _descriptor(i: int, desc: Any) -> tuple[str, str, tuple[int, ...]]:
    """(name, dtype, shape) of one array descriptor, checked by hand: this runs for every array frame."""
    if type(desc) is not dict or desc.keys() != DESCRIPTOR_KEYS:
        raise bad_message(f"arrays[{i}]: expected a map with keys {sorted(DESCRIPTOR_KEYS)}")
    name, dtype, shape = desc["name"], desc["dtype"], desc["shape"]
    if type(name) is not str or not 0 < len(name) <= MAX_NAME_CHARS:
        raise bad_message(f"arrays[{i}].name: expected a str of 1..{MAX_NAME_CHARS} chars")
    if type(dtype) is not str or dtype not in WIRE_DTYPES:
        raise bad_value(f"{name}: dtype {_describe(dtype)} is not one of {sorted(WIRE_DTYPES)}")
    if type(shape) is not list or len(shape) > MAX_RANK:
        raise bad_message(f"{name}: shape must be a list of at most {MAX_RANK} ints in [0, {MAX_DIM}]")
    for size in shape:
        if type(size) is not int or not 0 <= size <= MAX_DIM:
            raise bad_message(f"{name}: shape must be a list of at most {MAX_RANK} ints in [0, {MAX_DIM}]")
    return name, dtype, tuple(shape)


def _arrays(mtype: MessageType, descriptors: list, views: list[memoryview], limits: Limits) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    if not descriptors:
        return arrays
    receivable = _receivable(mtype, limits)
    for i, (desc, view) in enumerate(zip(descriptors, views, strict=True)):
        name, dtype_name, shape = _descriptor(i, desc)
        dtype = WIRE_DTYPES[dtype_name]
        if name in arrays:
            raise bad_message(f"arrays: duplicate name {name!r}")
        if math.prod(shape) * dtype.itemsize != view.nbytes:
            raise bad_message(f"{name}: descriptor {dtype_name}{list(shape)} does not match a {view.nbytes}-byte frame")
        bounds = receivable.image if name.startswith(IMAGE_PREFIX) else receivable.fields.get(name)
        if bounds is None:
            raise bad_message(f"{mtype.value}: unexpected array {name!r}")
        _check_bounds(name, dtype_name, shape, bounds)
        # Not a copy: the array shares the frame's memory (read-only if the frame is); the sizes match (checked above).
        array = np.ndarray(shape, dtype, buffer=view)
        if dtype.kind == "f" and not _all_finite(array):
            raise bad_value(f"{name}: contains NaN or inf")
        arrays[name] = array
    return arrays


def _all_finite(array: np.ndarray) -> bool:
    # count_nonzero is a C function; ndarray.all() goes through numpy's Python wrapper (~1 us more per array).
    return np.count_nonzero(np.isfinite(array)) == array.size


def _check_bounds(name: str, dtype: str, shape: tuple[int, ...], bounds: ArrayBounds) -> None:
    if dtype != bounds.dtype:
        raise bad_value(f"{name}: expected dtype {bounds.dtype}, got {dtype}")
    if len(shape) != len(bounds.dims):
        raise bad_value(f"{name}: expected {len(bounds.dims)} dims, got shape {list(shape)}")
    for axis, (size, (low, high)) in enumerate(zip(shape, bounds.dims, strict=True)):
        if not low <= size <= high:
            raise bad_value(f"{name}: size {size} of axis {axis} out of range [{low}, {high}]")


@functools.lru_cache(maxsize=64)
def _receivable(mtype: MessageType, limits: Limits) -> ReceivableArrays:
    """The array fields of `mtype` with Limits attribute names resolved (cached: Limits is frozen)."""
    fields = {name: _resolve(spec, limits) for name, spec in ARRAY_FIELDS.get(mtype, {}).items()}
    image = IMAGE_FIELDS.get(mtype)
    return ReceivableArrays(fields, None if image is None else _resolve(image, limits))


def _resolve(spec: ArrayField, limits: Limits) -> ArrayBounds:
    dims = tuple((low, getattr(limits, high) if isinstance(high, str) else high) for low, high in spec.dims)
    return ArrayBounds(spec.dtype, dims)


def _build(mtype: MessageType, body: dict, arrays: dict[str, np.ndarray], limits: Limits) -> Message:
    if mtype is MessageType.INFER:
        return _build_infer(body, arrays, limits)
    if mtype is MessageType.ACTIONS:
        return _build_actions(body, arrays)
    return SIMPLE_MESSAGES[mtype](**body)


def _build_infer(body: dict, arrays: dict[str, np.ndarray], limits: Limits) -> Infer:
    images = {name[len(IMAGE_PREFIX) :]: arrays.pop(name) for name in list(arrays) if name.startswith(IMAGE_PREFIX)}
    if len(images) > limits.max_images or "" in images:
        raise bad_value(f"images: expected 0..{limits.max_images} images with non-empty camera names")
    if "state" not in arrays:
        raise bad_message("INFER: missing array 'state'")
    state, future = arrays["state"], arrays.get("future_state")
    if future is not None and future.shape != state.shape:
        raise bad_value(f"future_state: shape {list(future.shape)} differs from state {list(state.shape)}")
    prefix, guidance = arrays.get("prefix"), arrays.get("guidance")
    if prefix is not None and guidance is not None and prefix.shape[1] != guidance.shape[1]:
        raise bad_value(f"guidance: {guidance.shape[1]} action dims differ from prefix's {prefix.shape[1]}")
    return Infer(images=images, **arrays, **body)


def _build_actions(body: dict, arrays: dict[str, np.ndarray]) -> Actions:
    if "actions" not in arrays:
        raise bad_message("ACTIONS: missing array 'actions'")
    n, start, length = len(arrays["actions"]), body["start"], body["chunk_length"]
    if start + n > length:
        raise bad_value(f"actions[{start}:{start + n}] exceed chunk_length {length}")
    # A final message carries rows [0, m): the whole chunk (m = H), or fewer rows when a horizon-aware request with an
    # execution horizon stopped sampling once the rows the robot runs were final (docs/PROTOCOL.md, ACTIONS).
    if body["final"] and (start != 0 or n == 0):  # start 0: n <= length holds (checked above)
        raise bad_value(f"a final ACTIONS must carry rows [0, m) with 1 <= m <= {length}, got start={start}, n={n}")
    if not body["final"] and n == 0:
        raise bad_value("a partial ACTIONS must carry at least one action")
    return Actions(actions=arrays["actions"], **body)
