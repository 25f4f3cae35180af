"""encode / decode: messages (msgspec Structs, messages.py) <-> ZeroMQ multipart frames (msgpack header + array frames).

decode treats its input as hostile: every size is checked before anything is allocated, the header is decoded by
msgspec straight into its message type's structs (wire.py: in C, stopping at the first bad element), and any
failure is a MessageError (a ProtocolError) whose `.code` is the ErrorCode to reply with (refusals.py says which).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from robot_io.protocol.arrays import named_arrays, receivable, received_arrays, wire_frame
from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import (
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    Actions,
    Infer,
    Message,
    MessageType,
    bad_message,
    bad_value,
)
from robot_io.protocol.refusals import (
    DECODE_ERRORS,
    MAX_HEADER_DEPTH,
    excess_entries,
    field_refusal,
    header_refusal,
    version_refusal,
)
from robot_io.protocol.wire import (
    BODY_KEYS,
    HEADER_ENCODER,
    HEADER_KEYS,
    MESSAGES,
    STRUCT_LISTS,
    UNIQUE,
    check_unique,
    header_types,
)

__all__ = ["MAX_HEADER_DEPTH", "check", "decode", "encode"]

DEFAULT_LIMITS = Limits()
FIXMAP_OF_HEADER = 0x80 | len(HEADER_KEYS)  # a header map's first byte (any encoder packs 4 entries as a fixmap)
BODY_ENTRIES = {mtype: len(keys) for mtype, keys in BODY_KEYS.items()}
BODY_FIRST_BYTE = {mtype: 0x80 | entries for mtype, entries in BODY_ENTRIES.items()}  # fixmaps: <= 15 fields each


def encode(message: Message, limits: Limits = DEFAULT_LIMITS, validate: bool = False) -> list[bytes | memoryview]:
    """Frames to pass to `socket.send_multipart(frames, copy=False)`; arrays are not copied when already
    C-contiguous little-endian. Array types and dtypes are checked here (MessageError); the header's fields and every
    bound are checked by the receiver's `decode`. With `validate`, the frames are decoded once here too, so nothing
    is sent that the receiver would refuse (opt-in: it doubles the codec's work per message)."""
    mtype, body, arrays = _parts(message)
    descriptors, frames = [], []
    for name, value in arrays:
        dtype, frame = wire_frame(value)
        descriptors.append({"name": name, "dtype": dtype, "shape": list(value.shape)})
        frames.append(frame)
    out = [_pack_header(mtype, body, descriptors), *frames]
    if validate:
        decode(out, limits)
    return out


def check(message: Message, limits: Limits = DEFAULT_LIMITS) -> Message:
    """The checks `decode` makes, on a message made in this process (an in-process client's request, never sent):
    it is encoded and decoded as a receiver would (its arrays are not copied: the frames are views of them), so every
    check a receiver makes holds for it too. MessageError naming the first thing a receiver would refuse; else the
    message as decode builds it."""
    return decode(encode(message), limits)


def decode(frames: Sequence[Any], limits: Limits = DEFAULT_LIMITS) -> Message:
    """Parse and validate one multipart message; raises MessageError (with `.code`) on any bad input.

    Frames may be bytes, memoryviews or zmq.Frame objects. Arrays are zero-copy views of the frames:
    read-only when the frame is (bytes, zmq.Frame), so copy an array before writing to it.
    """
    views = _views(frames, limits)
    mtype, header, body = _decode_header(views, limits)
    if len(header.arrays) != len(views) - 1:
        raise bad_message(f"arrays: expected a list of {len(views) - 1} descriptors (one per array frame)")
    arrays = received_arrays(mtype, header.arrays, views[1:], limits)
    return _build(mtype, body, arrays, limits)


def _parts(message: Message) -> tuple[MessageType, dict, list[tuple[str, np.ndarray]]]:
    """A message's type, header body and named arrays (their types and dtypes checked: MessageError)."""
    mtype = MESSAGE_TYPES.get(type(message))
    if mtype is None:
        raise bad_message(f"cannot encode {type(message).__name__}: not a protocol message")
    body = {key: getattr(message, key) for key in BODY_KEYS[mtype]}  # a struct in it packs as a map
    return mtype, body, named_arrays(message)


def _pack_header(mtype: MessageType, body: dict, descriptors: list[dict]) -> bytes:
    header = {"v": PROTOCOL_VERSION, "type": mtype.value, "body": body, "arrays": descriptors}
    try:
        return HEADER_ENCODER.encode(header)
    except (msgspec.EncodeError, TypeError, OverflowError) as exc:
        raise bad_value(f"{mtype.value}: cannot pack header: {exc}") from None


def _decode_header(views: Sequence[memoryview], limits: Limits) -> tuple[MessageType, Any, Any]:
    """The header (the first of `views`) decoded into its message type's structs, and its body; else the refusal of
    the first fault the decoder met (refusals.py), the version's first."""
    types, view = header_types(limits), views[0]
    try:
        header = types.decoder.decode(view)
    except DECODE_ERRORS as error:
        raise header_refusal(view, error) from None
    if header.v != PROTOCOL_VERSION:
        raise version_refusal(header.v)
    mtype = types.message_types[type(header)]
    # the first byte of a map of as many entries as its fields (a fixmap) says it has no key twice; anything else is
    # counted (a sender may pack a short map as a map16)
    if view[0] != FIXMAP_OF_HEADER and (refused := excess_entries("header", view, len(HEADER_KEYS))):
        raise refused
    raw = header.body
    if memoryview(raw)[0] != BODY_FIRST_BYTE[mtype] and (
        refused := excess_entries(f"{mtype.value}.body", raw, BODY_ENTRIES[mtype])
    ):
        raise refused
    try:
        body = types.body_decoders[mtype].decode(raw)
    except DECODE_ERRORS as error:
        raise field_refusal(f"{mtype.value}.body", error, types.bodies[mtype]) from None
    for field, unique in UNIQUE[mtype]:
        keys = [getattr(item, unique.key) for item in getattr(body, field)]
        check_unique(f"{mtype.value}.body.{field}", unique, keys)
    return mtype, header, body


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


def _build(mtype: MessageType, body: Any, arrays: dict[str, np.ndarray], limits: Limits) -> Message:
    """The message of a checked body and arrays, once the checks across its fields pass."""
    cls = MESSAGES[mtype]
    fields = msgspec.structs.asdict(body)
    for field, item in STRUCT_LISTS[mtype]:
        fields[field] = [item(*msgspec.structs.astuple(value)) for value in fields[field]]
    message = cls(**fields, **receivable(limits)[mtype].fields(arrays))
    if cls is Infer:
        _infer_across(message)
    elif cls is Actions:
        _actions_rows(message)
    return message


def _infer_across(infer: Infer) -> None:
    state, future, prefix, guidance = infer.state, infer.future_state, infer.prefix, infer.guidance
    if future is not None and future.shape != state.shape:
        raise bad_value(f"future_state: shape {list(future.shape)} differs from state {list(state.shape)}")
    if prefix is not None and guidance is not None and prefix.shape[1] != guidance.shape[1]:
        raise bad_value(f"guidance: {guidance.shape[1]} action dims differ from prefix's {prefix.shape[1]}")


def _actions_rows(message: Actions) -> None:
    n, start, length = len(message.actions), message.start, message.chunk_length
    if start + n > length:
        raise bad_value(f"actions[{start}:{start + n}] exceed chunk_length {length}")
    # A final message carries rows [0, m): the whole chunk (m = H), or fewer rows when a horizon-aware request with an
    # execution horizon stopped sampling once the rows the robot runs were final (docs/PROTOCOL.md, ACTIONS).
    if message.final and (start != 0 or n == 0):  # start 0: n <= length holds (checked above)
        raise bad_value(f"a final ACTIONS must carry rows [0, m) with 1 <= m <= {length}, got start={start}, n={n}")
    if not message.final and n == 0:
        raise bad_value("a partial ACTIONS must carry at least one action")
