"""The header frame as typed structs (msgspec): what `decode` accepts, message type by message type.

Every bound is in the types, the receiver's `Limits` included (one set of types per Limits, built on first use:
`header_types`). msgspec decodes a header straight into them, in C, and stops at the first element that does not fit:
a field of the wrong msgpack type, a key missing or extra, a value or a length out of bounds (a length before the
items), an ext type anywhere, nesting deeper than the type. The body is decoded second, from the msgspec.Raw the
header decode leaves it, so that its map's entry count can be read too. What no type can say is checked right after
(codec.py): no duplicate key in the header or body map, camera names unique (`unique_cameras`).
Why a header that does not decode is refused, and with which ErrorCode, is refusals.py's. docs/PROTOCOL.md describes
every field.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, Union

import msgspec
import numpy as np
from msgspec import Meta, Struct

from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import SCHEDULES, ErrorCode, MessageType, bad_value

INT64_MAX = 2**63 - 1
FLOAT_MAX = 1.7976931348623157e308  # the largest finite float: NaN and +-inf are outside [-FLOAT_MAX, FLOAT_MAX]
MAX_MAP_ENTRIES = 256  # entries of timing_ms and counters
IMAGE_PREFIX = "image/"  # an image array is named "image/<camera name>"
MAX_NAME_CHARS = 256 + len(IMAGE_PREFIX)  # an array's name
MAX_RANK = 4  # dims of an array
MAX_DIM = 2**31 - 1  # size of one dim
HEADER_KEYS = {"v", "type", "body", "arrays"}
STRICT = {"forbid_unknown_fields": True, "gc": False}  # every struct: no key but its fields, no GC tracking
T = TypeVar("T")


def between(low: int, high: int) -> Any:
    return Annotated[int, Meta(ge=low, le=high)]


def text(max_chars: int) -> Any:
    return Annotated[str, Meta(max_length=max_chars)]


UInt = between(0, INT64_MAX)  # request ids, step indices, wall-clock ns, seeds
Version = between(0, 2**31 - 1)
Finite = Annotated[float, Meta(ge=-FLOAT_MAX, le=FLOAT_MAX)]  # an int is accepted (as a float)
Int64 = between(-INT64_MAX - 1, INT64_MAX)
Name = text(256)
Short = text(64)
Key = text(64)  # keys of timing_ms and counters
Schedule = Literal[SCHEDULES]


def number_map(value: Any) -> Any:
    """timing_ms, counters: str keys, at most MAX_MAP_ENTRIES."""
    return Annotated[dict[Key, value], Meta(max_length=MAX_MAP_ENTRIES)]


class ArrayDescriptor(Struct, **STRICT):
    """One array frame: its name, wire dtype and shape (C order)."""

    name: Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)]
    dtype: Literal["uint8", "float32"]
    shape: Annotated[list[between(0, MAX_DIM)], Meta(max_length=MAX_RANK)]


def body_fields(limits: Limits) -> dict[MessageType, list[tuple[str, Any]]]:
    """The fields of every message type's body, in the order a sender writes them, each with its type; the bounds
    a receiver sets are `limits`'."""
    prompt = text(limits.max_prompt_chars)  # and other free text
    index = between(0, limits.max_chunk_length)  # a row of a chunk, or a count of rows
    length = between(1, limits.max_chunk_length)
    side = between(1, limits.max_image_side)
    camera = msgspec.defstruct("Camera", [("name", Name), ("height", side), ("width", side)], **STRICT)
    return {
        MessageType.HELLO: [("client", Name), ("version", Version)],
        MessageType.METADATA: [
            ("model_id", prompt),
            ("cameras", Annotated[list[camera], Meta(max_length=limits.max_images)]),
            ("state_dim", between(1, limits.max_state_dim)),
            ("action_dim", between(1, limits.max_action_dim)),
            ("chunk_length", length),
            ("control_rate_hz", Annotated[float, Meta(ge=1e-3, le=1e5)]),
            ("precision", Short),
            ("engine", Short),
            ("num_steps", length),
            ("schedule", Schedule),
            ("relative_actions", bool),
            ("version", Version),
        ],
        MessageType.INFER: [
            ("request_id", UInt),
            ("step_index", UInt),
            ("capture_time_ns", UInt),
            ("prompt", prompt),
            ("delay_steps", index),
            ("schedule", Schedule | None),
            ("execution_horizon", index | None),
            ("seed", UInt | None),
        ],
        MessageType.ACTIONS: [
            ("request_id", UInt),
            ("start", index),
            ("final", bool),
            ("chunk_length", length),
            ("step_index", UInt),
            ("timing_ms", number_map(Finite)),
        ],
        MessageType.ERROR: [("code", ErrorCode), ("message", prompt), ("request_id", UInt | None)],
        MessageType.PING: [("sent_ns", UInt), ("server_ns", UInt | None)],
        MessageType.RESET: [],
        MessageType.STATS: [("counters", number_map(Int64 | Finite))],  # ints stay ints
    }


BODY_KEYS = {mtype: tuple(name for name, _ in fields) for mtype, fields in body_fields(Limits()).items()}


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
    for mtype, fields in body_fields(limits).items():
        bodies[mtype] = msgspec.defstruct(f"{mtype.value.title()}Body", fields, **STRICT)
        header = [("v", int), ("body", msgspec.Raw), ("arrays", descriptors)]
        name = f"{mtype.value.title()}Header"
        headers[msgspec.defstruct(name, header, tag_field="type", tag=mtype.value, **STRICT)] = mtype
    decoder = msgspec.msgpack.Decoder(Union[tuple(headers)])  # noqa: UP007 - a union of types built at runtime
    return HeaderTypes(bodies, headers, decoder, {m: msgspec.msgpack.Decoder(b) for m, b in bodies.items()})


def unique_cameras(names: list[str]) -> None:
    """METADATA's cameras have distinct names (else BAD_VALUE): the one check no type says."""
    if len(set(names)) != len(names):
        raise bad_value("METADATA.body.cameras: duplicate camera names")


def plain_scalar(value: Any) -> Any:
    """numpy scalars (in timing_ms, counters) as the Python numbers msgpack packs; anything else cannot be packed."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialize {type(value).__name__}")


HEADER_ENCODER = msgspec.msgpack.Encoder(enc_hook=plain_scalar)  # maps keep their key order: the wire's
