"""The header frame as typed structs, derived from the message declarations (messages.py): what `decode` accepts.

A message's body is its fields but the `ArrayField` ones, in their declared order. `header_types(limits)` turns every
declaration into the struct a receiver with these `Limits` decodes into (each `Bound` set from them; built on first
use), and the header into a union tagged by "type". msgspec decodes a header straight into them, in C, and stops at the
first element that does not fit: a field of the wrong msgpack type, a key missing or extra, a value or a length out of
bounds (a length before the items), an ext type anywhere, nesting deeper than the type. The body is decoded second,
from the msgspec.Raw the header decode leaves it, so that its map's entry count can be read too. What no type can say
is checked right after (codec.py): no duplicate key in the header or body map, `Unique` lists. Why a header that does
not decode is refused, and with which ErrorCode, is refusals.py's. docs/PROTOCOL.md describes every field.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import msgspec
import numpy as np
from msgspec import Meta, Struct

from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import IMAGES, MESSAGE_TYPES, ArrayField, Bound, MessageType, Unique, bad_value

MAX_NAME_CHARS = 256 + len(IMAGES.prefix)  # an array's name: "image/" and a camera name
MAX_RANK = 4  # dims of an array
MAX_DIM = 2**31 - 1  # size of one dim
HEADER_KEYS = {"v", "type", "body", "arrays"}
STRICT = {"forbid_unknown_fields": True, "gc": False}  # every struct: no key but its fields, no GC tracking
MESSAGES = {mtype: cls for cls, mtype in MESSAGE_TYPES.items()}
T = TypeVar("T")


class ArrayDescriptor(Struct, **STRICT):
    """One array frame: its name, wire dtype and shape (C order)."""

    name: Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)]
    dtype: Literal["uint8", "float32"]
    shape: Annotated[list[Annotated[int, Meta(ge=0, le=MAX_DIM)]], Meta(max_length=MAX_RANK)]


def marks(field_type: Any) -> tuple[Any, ...]:
    """The metadata of an Annotated type (its bounds and marks); () for any other type."""
    return field_type.__metadata__ if get_origin(field_type) is Annotated else ()


def declared_array(field: msgspec.structs.FieldInfo) -> ArrayField | None:
    """The field's ArrayField, if it is sent as array frames."""
    return next((mark for mark in marks(field.type) if isinstance(mark, ArrayField)), None)


def struct_list(field_type: Any) -> type[Struct] | None:
    """The item struct of a list-of-structs type, else None."""
    base = get_args(field_type)[0] if marks(field_type) else field_type
    item = get_args(base)[0] if get_origin(base) is list else None
    return item if isinstance(item, type) and issubclass(item, Struct) else None


BODY_FIELDS = {  # the fields each message type's body carries, in the order a sender writes them
    mtype: tuple(f for f in msgspec.structs.fields(cls) if declared_array(f) is None) for mtype, cls in MESSAGES.items()
}
BODY_KEYS = {mtype: tuple(f.name for f in fields) for mtype, fields in BODY_FIELDS.items()}
ARRAY_FIELDS = {  # (field, its ArrayField, whether a message must carry it), in declared order: checked in that order
    cls: tuple((f.name, spec, f.required) for f in msgspec.structs.fields(cls) if (spec := declared_array(f)))
    for cls in MESSAGE_TYPES
}
UNIQUE = {  # the `Unique` lists of each message type's body
    mtype: tuple((f.name, m) for f in fields for m in marks(f.type) if isinstance(m, Unique))
    for mtype, fields in BODY_FIELDS.items()
}
STRUCT_LISTS = {  # the lists of structs in a body (METADATA's cameras): built as the declared struct on receipt
    mtype: tuple((f.name, item) for f in fields if (item := struct_list(f.type)) is not None)
    for mtype, fields in BODY_FIELDS.items()
}


def resolved(field_type: Any, limits: Limits) -> Any:
    """`field_type` with every `Bound` in it set from `limits`, and every message struct in it as its body's struct."""
    origin, args = get_origin(field_type), get_args(field_type)
    if origin is Annotated:
        bounds = (mark.meta(limits) if isinstance(mark, Bound) else mark for mark in field_type.__metadata__)
        return Annotated[(resolved(args[0], limits), *bounds)]
    if origin in (Union, types.UnionType):
        return Union[tuple(resolved(arg, limits) for arg in args)]  # noqa: UP007 - built at runtime
    if origin in (list, dict):
        return origin[tuple(resolved(arg, limits) for arg in args)]
    if isinstance(field_type, type) and issubclass(field_type, Struct):
        return body_struct(field_type, limits)
    return field_type


def body_struct(cls: type[Struct], limits: Limits) -> type[Struct]:
    """The struct a receiver with `limits` decodes a `cls`'s body into: its fields but the ArrayField ones."""
    fields = [(f.name, resolved(f.type, limits)) for f in msgspec.structs.fields(cls) if declared_array(f) is None]
    return msgspec.defstruct(f"{cls.__name__}Body", fields, **STRICT)


@dataclass(frozen=True)
class HeaderTypes:
    """The header types of one `Limits`, and the decoder into their union (tagged by "type")."""

    bodies: dict[MessageType, type[Struct]]
    message_types: dict[type[Struct], MessageType]  # header struct -> its message type
    decoder: msgspec.msgpack.Decoder  # the header, its body left a msgspec.Raw
    body_decoders: dict[MessageType, msgspec.msgpack.Decoder]  # a body of each message type


def per_limits(build: Callable[[Limits], T]) -> Callable[[Limits], T]:
    """`build(limits)`, built once per Limits (frozen: equal ones share it). The Limits last asked for is matched by
    identity first: a receiver asks with its own Limits every time, and then skips hashing it. Thread-safe: each
    step reads or replaces one reference (two threads may build the same thing once each)."""
    built: dict[Limits, T] = {}
    last: list[tuple[Limits | None, T | None]] = [(None, None)]  # (limits, what it built) of the last call

    @functools.wraps(build)
    def cached(limits: Limits) -> T:
        entry = last[0]
        if entry[0] is limits:
            return entry[1]
        result = built.get(limits)
        if result is None:
            result = build(limits)
            if len(built) >= 64:
                built.clear()
            built[limits] = result
        last[0] = (limits, result)
        return result

    return cached


@per_limits
def header_types(limits: Limits) -> HeaderTypes:
    """The header types whose bounds are `limits` (built on first use: ~1 ms)."""
    bodies, headers = {}, {}
    descriptors = Annotated[list[ArrayDescriptor], Meta(max_length=limits.max_frames - 1)]  # one per array frame
    for mtype in MESSAGES:
        bodies[mtype] = body_struct(MESSAGES[mtype], limits)
        header = [("v", int), ("body", msgspec.Raw), ("arrays", descriptors)]
        name = f"{mtype.value.title()}Header"
        headers[msgspec.defstruct(name, header, tag_field="type", tag=mtype.value, **STRICT)] = mtype
    decoder = msgspec.msgpack.Decoder(Union[tuple(headers)])  # noqa: UP007 - a union of types built at runtime
    return HeaderTypes(bodies, headers, decoder, {m: msgspec.msgpack.Decoder(b) for m, b in bodies.items()})


def check_unique(where: str, unique: Unique, keys: list[Any]) -> None:
    """BAD_VALUE when two items of a `Unique` list share their key: the one check no type says."""
    if len(set(keys)) != len(keys):
        raise bad_value(f"{where}: duplicate {unique.what}")


def plain_scalar(value: Any) -> Any:
    """numpy scalars (in timing_ms, counters) as the Python numbers msgpack packs; anything else cannot be packed."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialize {type(value).__name__}")


HEADER_ENCODER = msgspec.msgpack.Encoder(enc_hook=plain_scalar)  # maps keep their key order: the wire's
