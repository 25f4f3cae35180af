"""Why a header frame is refused: its ErrorCode and one line naming the field, for a header that did not decode into
its message type's structs (wire.py). This runs only for a refused header; one that decodes never comes here.

The header is read again, untyped, and checked in the protocol's order one field at a time against the same types
(msgspec.convert), so a header with several faults gets the refusal of the first in that order, whatever order its
sender wrote them in: a header nested deeper than a valid one, or with a map key that is not a str, is BAD_MESSAGE
before anything else is read from it; then `v` (BAD_VERSION whatever the rest holds, so a later version may change
the rest freely); then the header's keys and type; then the body's keys, and its fields in the order of
`wire.body_fields`; then the array descriptors, each followed by the checks of its frame (arrays.py). A field of the
wrong msgpack type, or a key missing or extra, is BAD_MESSAGE; the right type with a value out of bounds BAD_VALUE.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Annotated, Any, get_args, get_origin

import msgspec

from robot_io.protocol.arrays import received_arrays
from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import (
    PROTOCOL_VERSION,
    SCHEDULES,
    ErrorCode,
    MessageError,
    MessageType,
    bad_message,
    bad_value,
)
from robot_io.protocol.wire import (
    HEADER_KEYS,
    MAX_DIM,
    MAX_NAME_CHARS,
    MAX_RANK,
    ArrayDescriptor,
    header_types,
    unique_cameras,
)

# The deepest a valid header nests: header > body > cameras > one camera, or header > arrays > descriptor > shape.
MAX_HEADER_DEPTH = 4
DESCRIPTOR = {field.name: field.type for field in msgspec.structs.fields(ArrayDescriptor)}
WIRE_DTYPE_NAMES = sorted(get_args(DESCRIPTOR["dtype"]))
CHOICES = {"schedule": f"one of {list(SCHEDULES)}", "code": "an ErrorCode"}  # the fields of a fixed set of values
WRONG_TYPE = re.compile(r"Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`")  # msgspec's ValidationError
# msgspec names msgpack types as JSON does (object, array, null); a Python container by its type
MSGPACK_NAMES = {"object": "map", "array": "list", "null": "nil", "dict": "map", "list": "list"}
UNTYPED = msgspec.msgpack.Decoder()


def header_refusal(view: memoryview, views: Sequence[memoryview], limits: Limits) -> MessageError:
    """The refusal of the header in `view` (the first of `views`), which did not decode into its structs."""
    try:
        _check_in_order(view, views, limits)
    except MessageError as refusal:
        return refusal
    return bad_message("header: refused by the decoder, not by a check (a bug: please report it)")


def version_refusal(version: int) -> MessageError:
    supported = f"protocol version {version} is not supported (this end speaks {PROTOCOL_VERSION})"
    return MessageError(ErrorCode.BAD_VERSION, supported)


def describe(value: Any) -> str:
    """A received value for an error message: a str shortened, anything else by type only (never repr'd whole)."""
    return repr(value[:32]) if type(value) is str else type(value).__name__


def _check_in_order(view: memoryview, views: Sequence[memoryview], limits: Limits) -> None:
    try:
        header = UNTYPED.decode(view)  # at most max_header_bytes
    except RecursionError:
        raise bad_message(f"header: nested deeper than {MAX_HEADER_DEPTH} levels") from None
    except (msgspec.DecodeError, ValueError, TypeError) as exc:  # TypeError: an unhashable key (msgspec < 0.19)
        raise bad_message(f"header is not valid msgpack: {str(exc)[:200]}") from None
    if (fault := shape_fault(header, MAX_HEADER_DEPTH)) is not None:
        raise bad_message(f"header: {fault}")
    if type(header) is not dict:
        raise bad_message(f"header: expected map, got {type(header).__name__}")
    version = header.get("v")
    if type(version) is not int:
        raise bad_message("header: missing or non-int version 'v'")
    if version != PROTOCOL_VERSION:
        raise version_refusal(version)
    if header.keys() != HEADER_KEYS:
        raise bad_message(f"header: expected keys {sorted(HEADER_KEYS)}, got {sorted(str(k) for k in header)[:16]}")
    kind = header["type"]
    mtype = MessageType._value2member_map_.get(kind) if type(kind) is str else None
    if mtype is None:
        raise bad_message(f"header: unknown message type {describe(kind)}")
    check_body(mtype, header["body"], limits)
    descriptors = header["arrays"]
    if type(descriptors) is not list or len(descriptors) != len(views) - 1:
        raise bad_message(f"arrays: expected a list of {len(views) - 1} descriptors (one per array frame)")
    # each descriptor is checked just before its frame (a generator: received_arrays takes one at a time)
    received_arrays(mtype, (_descriptor(i, d) for i, d in enumerate(descriptors)), views[1:], limits)


def check_body(mtype: MessageType, body: Any, limits: Limits) -> None:
    """Raise the refusal of the first field of `body` (plain values: as decoded untyped, or made in this process)
    that a receiver with `limits` refuses, in the order of `wire.body_fields`."""
    _check_struct(f"{mtype.value}.body", body, header_types(limits).bodies[mtype])


def shape_fault(value: Any, levels: int) -> str | None:
    """Why `value` cannot be a header, whatever its fields: nested deeper than `levels` levels of maps and lists, or a
    map key that is not a str or bytes (as msgpack's strict_map_key); None if neither. The recursion is bounded."""
    if type(value) is dict:
        if any(type(key) is not str and type(key) is not bytes for key in value):
            return "a map key that is not a str"
        children = value.values()
    elif type(value) is list:
        children = value
    else:
        return None
    if levels == 0:
        return f"nested deeper than {MAX_HEADER_DEPTH} levels"
    for child in children:
        if (type(child) is dict or type(child) is list) and (fault := shape_fault(child, levels - 1)) is not None:
            return fault
    return None


def _check_struct(where: str, value: Any, struct: type[msgspec.Struct]) -> None:
    """A map with exactly the struct's keys, then each field in the struct's order."""
    if type(value) is not dict:
        raise bad_message(f"{where}: expected map, got {type(value).__name__}")
    fields = msgspec.structs.fields(struct)
    if value.keys() != {field.name for field in fields}:
        got = sorted(str(k) for k in value)[:32]
        raise bad_message(f"{where}: expected keys {sorted(field.name for field in fields)}, got {got}")
    for field in fields:
        _check_value(f"{where}.{field.name}", value[field.name], field.type)
        if field.name == "cameras":  # METADATA's: what no type says, checked before the next field
            unique_cameras([camera["name"] for camera in value["cameras"]])


def _check_value(where: str, value: Any, kind: Any) -> None:
    """A list or a map is checked itself (type, length) before its items; a map's keys before its values."""
    base, bounds = (get_args(kind)[0], get_args(kind)[1:]) if get_origin(kind) is Annotated else (kind, ())
    container = get_origin(base)
    if container not in (list, dict):
        _convert(where, value, kind)
        return
    if type(value) is not container:
        raise bad_message(f"{where}: expected {MSGPACK_NAMES[container.__name__]}, got {type(value).__name__}")
    _convert(where, value, Annotated[(container, *bounds)] if bounds else container)  # its length
    if container is list:
        for i, item in enumerate(value):
            _check_struct(f"{where}[{i}]", item, get_args(base)[0])  # the one list of a body: METADATA's cameras
        return
    key_type, value_type = get_args(base)
    for key in value:
        _convert(f"{where} key", key, key_type)
    for key, item in value.items():
        _convert(f"{where}[{key!r}]", item, value_type)


def _convert(where: str, value: Any, kind: Any) -> None:
    try:
        msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise _field_refusal(where, value, str(exc).split(" - at `")[0]) from None
    except (TypeError, ValueError, AttributeError):  # an object made in this process that msgspec cannot read
        raise bad_message(f"{where}: expected {kind}, got {type(value).__name__}") from None


def _field_refusal(where: str, value: Any, what: str) -> MessageError:
    if found := WRONG_TYPE.fullmatch(what):
        want, got = (MSGPACK_NAMES.get(found[key], found[key]) for key in ("want", "got"))
        return bad_message(f"{where}: expected {want}, got {got}")
    if what.startswith("Invalid enum value"):
        return bad_value(f"{where}={describe(value)} is not {CHOICES.get(where.rsplit('.')[-1], 'a valid value')}")
    bound = what.removeprefix("Expected ").replace("`", "")  # "int <= 10", "str of length <= 64", ...
    if type(value) is float and not math.isfinite(value):
        return bad_value(f"{where}={value} is not a finite number")
    if type(value) in (int, float):
        return bad_value(f"{where}={value} out of range (expected {bound})")
    if type(value) in (str, dict, list):
        unit = "chars" if type(value) is str else "entries"
        return bad_value(f"{where}: {len(value)} {unit} exceed the limit (expected {bound})")
    return bad_value(f"{where}: out of bounds (expected {bound})")


def _descriptor(i: int, desc: Any) -> ArrayDescriptor:
    """One descriptor, field by field: a bad name or shape is BAD_MESSAGE (they describe the frame), a dtype
    other than the wire's BAD_VALUE."""
    if type(desc) is not dict or desc.keys() != DESCRIPTOR.keys():
        raise bad_message(f"arrays[{i}]: expected a map with keys {sorted(DESCRIPTOR)}")
    name, dtype, shape = desc["name"], desc["dtype"], desc["shape"]
    if not _fits(name, DESCRIPTOR["name"]):
        raise bad_message(f"arrays[{i}].name: expected a str of 1..{MAX_NAME_CHARS} chars")
    if not _fits(dtype, DESCRIPTOR["dtype"]):
        raise bad_value(f"{name}: dtype {describe(dtype)} is not one of {WIRE_DTYPE_NAMES}")
    if not _fits(shape, DESCRIPTOR["shape"]):
        raise bad_message(f"{name}: shape must be a list of at most {MAX_RANK} ints in [0, {MAX_DIM}]")
    return ArrayDescriptor(name, dtype, shape)


def _fits(value: Any, kind: Any) -> bool:
    try:
        msgspec.convert(value, kind)
    except msgspec.ValidationError:
        return False
    return True
