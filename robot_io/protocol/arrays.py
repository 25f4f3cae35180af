"""Array frames: the checks of one received or in-process array (dtype, rank, sizes, frame length, finiteness) against
the `ArrayField` its field declares (messages.py), with the bounds of one `Limits`. Arrays travel as raw C-order
little-endian frames, each described by an `ArrayDescriptor` in the header (wire.py). This runs for every array of
every message, so it does the least Python that keeps the checks and their order."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import ArrayField, Message, MessageType, bad_message, bad_value
from robot_io.protocol.wire import ARRAY_FIELDS, MESSAGES, ArrayDescriptor, per_limits

WIRE_DTYPES = {"uint8": np.dtype("<u1"), "float32": np.dtype("<f4")}  # little-endian on the wire
DTYPE_NAMES = {"|u1": "uint8", "<f4": "float32", ">f4": "float32"}  # numpy dtype.str -> wire name (fast lookup)


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
    """The array fields of one message type, bounds resolved against one Limits (see `receivable`)."""

    mtype: MessageType
    singles: dict[str, ArrayBounds]  # the fields of one array each, by array name (= field name)
    required: tuple[str, ...]  # those a message must carry
    sets: tuple[tuple[str, ArrayField, int, ArrayBounds], ...]  # (field, declaration, Limits count, bounds) of dicts

    def bounds(self, name: str) -> ArrayBounds:
        bounds = self.singles.get(name)
        if bounds is None:
            for _, spec, _, found in self.sets:
                if name.startswith(spec.prefix):
                    return found
            raise bad_message(f"{self.mtype.value}: unexpected array {name!r}")
        return bounds

    def fields(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        """The array fields of a message, made of its checked arrays by wire name (in place: a single array's name is
        its field's; an optional one not sent keeps its default). Each dict field first: at most its Limits count, with
        non-empty names (else BAD_VALUE); then a required array missing is BAD_MESSAGE."""
        for field, spec, most, _ in self.sets:
            cut = len(spec.prefix)
            found = {name[cut:]: arrays.pop(name) for name in list(arrays) if name.startswith(spec.prefix)}
            if len(found) > most or "" in found:
                raise bad_value(f"{field}: expected 0..{most} {field} with non-empty {spec.key} names")
            arrays[field] = found
        for field in self.required:
            if field not in arrays:
                raise bad_message(f"{self.mtype.value}: missing array {field!r}")
        return arrays


@per_limits
def receivable(limits: Limits) -> dict[MessageType, ReceivableArrays]:
    """The array fields of every message type with Limits attribute names resolved (cached: Limits is frozen)."""
    out = {}
    for mtype, cls in MESSAGES.items():
        declared = ARRAY_FIELDS[cls]
        singles = {field: _resolve(spec, limits) for field, spec, _ in declared if spec.key is None}
        required = tuple(field for field, spec, needed in declared if spec.key is None and needed)
        sets = tuple((f, s, getattr(limits, s.max_count), _resolve(s, limits)) for f, s, _ in declared if s.key)
        out[mtype] = ReceivableArrays(mtype, singles, required, sets)
    return out


def _resolve(spec: ArrayField, limits: Limits) -> ArrayBounds:
    dims = tuple((low, getattr(limits, high) if isinstance(high, str) else high) for low, high in spec.dims)
    return ArrayBounds(spec.dtype, dims)


def named_arrays(message: Message) -> list[tuple[str, np.ndarray]]:
    """A message's arrays by wire name, each a numpy array of its field's dtype (else MessageError, BAD_VALUE): its
    single arrays in declared order (those not None, and the required ones), then each dict field's arrays."""
    named, prefixed = [], []
    for field, spec, required in ARRAY_FIELDS[type(message)]:
        value = getattr(message, field)
        if spec.key is None:
            if value is not None or required:
                named.append((field, value, spec))
        elif not isinstance(value, dict):
            raise bad_value(f"{field}: expected dict {spec.key} -> array, got {type(value).__name__}")
        else:
            prefixed += [(f"{spec.prefix}{key}", array, spec) for key, array in value.items()]
    named += prefixed
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
        receivable_arrays.bounds(name).check(name, desc.dtype, shape)
        # Not a copy: the array shares the frame's memory (read-only if the frame is); the sizes match (checked above).
        array = np.ndarray(tuple(shape), dtype, view)  # positional, a tuple: half the cost of keywords and a list
        if dtype.kind == "f" and not all_finite(array):
            raise bad_value(f"{name}: contains NaN or inf")
        arrays[name] = array
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
