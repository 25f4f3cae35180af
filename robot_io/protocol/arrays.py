"""Array frames: which arrays each message type carries, their bounds against one `Limits`, and the checks of one
received or in-process array (dtype, rank, sizes, frame length, finiteness). Arrays travel as raw C-order
little-endian frames, each described by an `ArrayDescriptor` in the header (wire.py). This runs for every array of
every message, so it does the least Python that keeps the checks and their order."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import Actions, Infer, Message, MessageType, bad_message, bad_value
from robot_io.protocol.wire import IMAGE_PREFIX, ArrayDescriptor, per_limits

WIRE_DTYPES = {"uint8": np.dtype("<u1"), "float32": np.dtype("<f4")}  # little-endian on the wire
DTYPE_NAMES = {"|u1": "uint8", "<f4": "float32", ">f4": "float32"}  # numpy dtype.str -> wire name (fast lookup)


@dataclass(frozen=True)
class ArrayField:
    """dtype and per-axis [low, high] size bounds of one array field (a str bound names a Limits attribute)."""

    dtype: str
    dims: tuple[tuple[int, int | str], ...]


VECTOR = ArrayField("float32", ((1, "max_state_dim"),))
ROWS = ArrayField("float32", ((0, "max_chunk_length"), (1, "max_action_dim")))
IMAGE = ArrayField("uint8", ((1, "max_image_side"), (1, "max_image_side"), (3, 3)))
INFER_ARRAYS = {"state": VECTOR, "future_state": VECTOR, "prefix": ROWS, "guidance": ROWS}
ARRAY_FIELDS = {MessageType.INFER: INFER_ARRAYS, MessageType.ACTIONS: {"actions": ROWS}}
IMAGE_FIELDS = {MessageType.INFER: IMAGE}  # the message types that carry "image/<camera>" arrays
OPTIONAL_INFER_ARRAYS = ("future_state", "prefix", "guidance")  # sent when not None


@dataclass(frozen=True)
class ArrayBounds:
    """An ArrayField with its bounds resolved against one Limits: what each received array is checked against."""

    dtype: str
    dims: tuple[tuple[int, int], ...]

    def check(self, name: str, dtype: str, shape: Sequence[int]) -> None:
        """BAD_VALUE naming the first of dtype, rank and axis sizes that is out of these bounds."""
        if dtype == self.dtype and len(shape) == len(self.dims):
            for size, (low, high) in zip(shape, self.dims):  # noqa: B905 - the lengths are equal (checked)
                if not low <= size <= high:
                    break
            else:
                return
        if dtype != self.dtype:
            raise bad_value(f"{name}: expected dtype {self.dtype}, got {dtype}")
        if len(shape) != len(self.dims):
            raise bad_value(f"{name}: expected {len(self.dims)} dims, got shape {list(shape)}")
        for axis, (size, (low, high)) in enumerate(zip(shape, self.dims, strict=True)):
            if not low <= size <= high:
                raise bad_value(f"{name}: size {size} of axis {axis} out of range [{low}, {high}]")


@dataclass(frozen=True)
class ReceivableArrays:
    """The arrays one message type may carry, bounds resolved against one Limits (see `receivable`)."""

    fields: dict[str, ArrayBounds]  # by array name
    image: ArrayBounds | None  # bounds of every "image/<camera>" array; None where the type carries no images

    def bounds(self, mtype: MessageType, name: str) -> ArrayBounds:
        bounds = self.fields.get(name)
        if bounds is None and name.startswith(IMAGE_PREFIX):
            bounds = self.image
        if bounds is None:
            raise bad_message(f"{mtype.value}: unexpected array {name!r}")
        return bounds


@per_limits
def receivable(limits: Limits) -> dict[MessageType, ReceivableArrays]:
    """The array fields of every message type with Limits attribute names resolved (cached: Limits is frozen)."""
    out = {}
    for mtype in MessageType:
        fields = {name: _resolve(spec, limits) for name, spec in ARRAY_FIELDS.get(mtype, {}).items()}
        image = IMAGE_FIELDS.get(mtype)
        out[mtype] = ReceivableArrays(fields, None if image is None else _resolve(image, limits))
    return out


def _resolve(spec: ArrayField, limits: Limits) -> ArrayBounds:
    dims = tuple((low, getattr(limits, high) if isinstance(high, str) else high) for low, high in spec.dims)
    return ArrayBounds(spec.dtype, dims)


def named_arrays(message: Message) -> list[tuple[str, np.ndarray]]:
    """A message's arrays by wire name, each a numpy array of its field's dtype (else MessageError, BAD_VALUE)."""
    if type(message) is Actions:
        named = [("actions", message.actions, ROWS)]
    elif type(message) is Infer:
        named = [("state", message.state, VECTOR)]
        for key in OPTIONAL_INFER_ARRAYS:
            if (value := getattr(message, key)) is not None:
                named.append((key, value, INFER_ARRAYS[key]))
        if not isinstance(message.images, dict):
            raise bad_value(f"images: expected dict camera -> array, got {type(message.images).__name__}")
        named += [(f"{IMAGE_PREFIX}{cam}", image, IMAGE) for cam, image in message.images.items()]
    else:
        return []
    for name, value, spec in named:
        if not isinstance(value, np.ndarray):
            raise bad_value(f"{name}: expected numpy array, got {type(value).__name__}")
        if DTYPE_NAMES.get(value.dtype.str) != spec.dtype:
            raise bad_value(f"{name}: expected dtype {spec.dtype}, got {value.dtype.name}")
    return [(name, value) for name, value, _ in named]


def received_arrays(
    mtype: MessageType, descriptors: Iterable[ArrayDescriptor], views: Sequence[memoryview], limits: Limits
) -> dict[str, np.ndarray]:
    """The array frames of one message as read-only numpy views of the frames (not copied), each checked."""
    arrays: dict[str, np.ndarray] = {}
    if not views:
        return arrays
    receivable_arrays = receivable(limits)[mtype]
    for desc, view in zip(descriptors, views, strict=True):
        name, shape = desc.name, desc.shape
        dtype = WIRE_DTYPES[desc.dtype]
        if name in arrays:
            raise bad_message(f"arrays: duplicate name {name!r}")
        if math.prod(shape) * dtype.itemsize != view.nbytes:
            raise bad_message(f"{name}: descriptor {desc.dtype}{shape} does not match a {view.nbytes}-byte frame")
        receivable_arrays.bounds(mtype, name).check(name, desc.dtype, shape)
        # Not a copy: the array shares the frame's memory (read-only if the frame is); the sizes match (checked above).
        array = np.ndarray(tuple(shape), dtype, view)  # positional, a tuple: half the cost of keywords and a list
        if dtype.kind == "f" and not all_finite(array):
            raise bad_value(f"{name}: contains NaN or inf")
        arrays[name] = array
    return arrays


def checked_arrays(mtype: MessageType, named: list[tuple[str, np.ndarray]], limits: Limits) -> dict[str, np.ndarray]:
    """The checks `received_arrays` makes, on the arrays of a message made in this process (not encoded)."""
    receivable_arrays = receivable(limits)[mtype]
    arrays: dict[str, np.ndarray] = {}
    for name, value in named:
        bounds = receivable_arrays.bounds(mtype, name)
        if value.nbytes > limits.max_frame_bytes:
            raise bad_message(f"{name}: {value.nbytes} bytes exceed the limit {limits.max_frame_bytes}")
        bounds.check(name, DTYPE_NAMES[value.dtype.str], value.shape)
        if value.dtype.kind == "f" and not all_finite(value):
            raise bad_value(f"{name}: contains NaN or inf")
        arrays[name] = value
    return arrays


def all_finite(array: np.ndarray) -> bool:
    # count_nonzero is a C function; ndarray.all() goes through numpy's Python wrapper (~1 us more per array).
    return np.count_nonzero(np.isfinite(array)) == array.size


def wire_frame(value: np.ndarray) -> tuple[str, memoryview]:
    """An array's wire dtype name and its bytes, C order little-endian (copied only when it is not already)."""
    dtype = value.dtype.str
    if dtype[0] == ">":
        value = value.astype(value.dtype.newbyteorder("<"))
    elif not value.flags.c_contiguous:
        value = np.ascontiguousarray(value)
    # a flat memoryview of the bytes, not copied (memoryview cannot cast an empty shape)
    return DTYPE_NAMES[dtype], value.data.cast("B") if value.size else memoryview(b"")
