"""The refusal path's reads of one value (refusals.py): a msgspec.Raw decoded with one type, and what its failure
means (BAD_MESSAGE: the wrong msgpack type; BAD_VALUE: the right type out of bounds), a map's entries, one array
descriptor. Each read decodes only the value it is given, with its own type, in C."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, TypeVar, get_args

import msgspec

from robot_io.protocol.messages import MessageError, bad_message, bad_value
from robot_io.protocol.msgpack_items import PYTHON_NAMES, count, entries, kind
from robot_io.protocol.wire import MAX_DIM, MAX_NAME_CHARS, MAX_RANK, ArrayDescriptor

MAX_LISTED = 64  # entries of a map read one by one (a valid header's largest struct map has 12); more: named by count
DESCRIPTOR = {field.name: field.type for field in msgspec.structs.fields(ArrayDescriptor)}
DESCRIPTOR_DECODERS = {name: msgspec.msgpack.Decoder(kind) for name, kind in DESCRIPTOR.items()}
WIRE_DTYPE_NAMES = sorted(get_args(DESCRIPTOR["dtype"]))
WRONG_TYPE = re.compile(r"Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`")  # msgspec's ValidationError
# msgspec names msgpack types as JSON does (object, array, null)
MSGPACK_NAMES = {"object": "map", "array": "list", "null": "nil"}
STR = msgspec.msgpack.Decoder(str)
UNTYPED = msgspec.msgpack.Decoder()
T = TypeVar("T")


def decoded(where: str, raw: Any, read: Callable[[Any], T], allowed: str = "a valid value") -> T:
    """`read(raw)`; a failure is the refusal of the field at `where` (whose values, if a fixed set, are `allowed`)."""
    try:
        return read(raw)
    except msgspec.ValidationError as exc:
        raise field_refusal(where, raw, str(exc).split(" - at `")[0], allowed) from None
    except RecursionError:
        raise bad_message(f"{where}: nested deeper than the decoder reads") from None
    except (msgspec.DecodeError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise bad_message(f"{where}: not valid msgpack: {str(exc)[:200]}") from None


def map_entries(where: str, buf: Any) -> list[tuple[str, msgspec.Raw]] | int:
    """The entries of the map in `buf`, keys str, in wire order (a key may come twice); or their count when over
    MAX_LISTED (then nothing is read past the map's first bytes)."""
    found = kind(buf)
    if found != "map":
        raise bad_message(f"{where}: expected map, got {PYTHON_NAMES[found]}")
    length = count(buf)
    if length is None:
        raise bad_message(f"{where}: not valid msgpack: cut short")
    if length[0] > MAX_LISTED:
        return length[0]
    items = decoded(where, buf, lambda raw: entries(raw, *length))
    keys = []
    for key in items[0::2]:
        if kind(key) != "str":
            raise bad_message(f"{where}: a map key that is not a str")
        keys.append(decoded(f"{where} key", key, STR.decode))
    return list(zip(keys, items[1::2], strict=True))


def field_refusal(where: str, raw: Any, what: str, allowed: str = "a valid value") -> MessageError:
    """The refusal of the value in `raw` at `where`, which msgspec refused saying `what`."""
    if found := WRONG_TYPE.fullmatch(what):
        want, got = (MSGPACK_NAMES.get(found[key], found[key]) for key in ("want", "got"))
        return bad_message(f"{where}: expected {want}, got {got}")
    value = scalar_value(raw)
    if what.startswith("Invalid enum value"):
        return bad_value(f"{where}={describe(value)} is not {allowed}")
    bound = what.removeprefix("Expected ").replace("`", "")  # "int <= 10", "str of length <= 64", ...
    if type(value) is float and not math.isfinite(value):
        return bad_value(f"{where}={value} is not a finite number")
    if type(value) in (int, float):
        return bad_value(f"{where}={value} out of range (expected {bound})")
    if type(value) is str:
        return bad_value(f"{where}: {len(value)} chars exceed the limit (expected {bound})")
    if kind(raw) in ("list", "map"):
        return bad_value(f"{where}: {count(raw)[0]} entries exceed the limit (expected {bound})")
    return bad_value(f"{where}: out of bounds (expected {bound})")


def scalar_value(raw: Any) -> Any:
    """The value in `raw` when it is not a list or a map (one object, within the header's size); else None."""
    if kind(raw) in ("list", "map", None):
        return None
    try:
        return UNTYPED.decode(raw)
    except (msgspec.DecodeError, ValueError):
        return None


def describe(value: Any) -> str:
    """A received value for an error message: a str shortened, anything else by type only (never repr'd whole)."""
    return repr(value[:32]) if type(value) is str else type(value).__name__


def descriptor(i: int, raw: msgspec.Raw) -> ArrayDescriptor:
    """One descriptor, field by field, every value of a key given twice (the last kept, as msgspec keeps it): a bad
    name or shape is BAD_MESSAGE (they describe the frame), a dtype str other than the wire's BAD_VALUE."""
    listed = map_entries(f"arrays[{i}]", raw) if kind(raw) == "map" else None
    if type(listed) is not list or {key for key, _ in listed} != DESCRIPTOR.keys():
        raise bad_message(f"arrays[{i}]: expected a map with keys {sorted(DESCRIPTOR)}")
    fields: dict[str, Any] = {}
    for field in DESCRIPTOR:
        for key, value in listed:
            if key == field:
                fields[field] = _fits(value, field)
                if fields[field] is None:
                    raise _descriptor_refusal(i, field, fields.get("name"), value)
    return ArrayDescriptor(fields["name"], fields["dtype"], fields["shape"])


def _descriptor_refusal(i: int, field: str, name: str | None, raw: msgspec.Raw) -> MessageError:
    if field == "name":
        return bad_message(f"arrays[{i}].name: expected a str of 1..{MAX_NAME_CHARS} chars")
    if field == "dtype":  # a str that is not a wire dtype: BAD_VALUE; anything else is of the wrong msgpack type
        if kind(raw) == "str":
            return bad_value(f"{name}: dtype {describe(scalar_value(raw))} is not one of {WIRE_DTYPE_NAMES}")
        return bad_message(f"{name}: dtype {PYTHON_NAMES[kind(raw)]} is not one of {WIRE_DTYPE_NAMES}")
    return bad_message(f"{name}: shape must be a list of at most {MAX_RANK} ints in [0, {MAX_DIM}]")


def _fits(raw: msgspec.Raw, field: str) -> Any:
    """The value of descriptor field `field` in `raw`, or None when it does not fit the field's type."""
    try:
        return DESCRIPTOR_DECODERS[field].decode(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
