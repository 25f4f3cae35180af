"""Why a header is refused: the decoder's own error as an ErrorCode and one line naming the field.

msgspec decodes a header into its message type's structs (wire.py) in C and stops at the first element that does not
fit, saying what it expected and where. A refusal is made from that error alone, nothing is decoded again, so a
refusal costs no more than the decode that met it: a 64 KiB header of 65,531 empty lists is refused at its first byte,
and no refusal builds an object per item of a container (a length is checked before the items). Two things are read
apart, from bounded reads: the version first, by a decode that steps over every other entry in C (BAD_VERSION
whatever the rest holds, so a later version may change the rest freely); then a header or body map's entry count,
from its first bytes (more entries than fields: a key unknown or given twice, refused before any value). Past those,
the first fault the decoder meets is named, in the order the message is written (docs/PROTOCOL.md, "Error codes").

A field of the wrong msgpack type, a key missing, extra or given twice, is BAD_MESSAGE; the right type with a value out
of bounds, or an unknown enum value, BAD_VALUE. An array descriptor describes its frame: a fault in it is BAD_MESSAGE,
but a dtype str that is not a wire dtype, BAD_VALUE.
"""

from __future__ import annotations

import re
from enum import Enum
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import msgspec

from robot_io.protocol.messages import (
    FLOAT_MAX,
    PROTOCOL_VERSION,
    ErrorCode,
    MessageError,
    bad_message,
    bad_value,
)
from robot_io.protocol.wire import HEADER_KEYS

# The deepest a valid header nests: header > body > cameras > one camera, or header > arrays > descriptor > shape.
MAX_HEADER_DEPTH = 4
WRONG_TYPE = re.compile(r"Expected `[^`]+`, got `[^`]+`")
TYPE_NAME = re.compile(r"`([^`]+)`")
MSGPACK_NAMES = {"object": "map", "array": "list", "null": "nil"}  # msgspec names msgpack types as JSON does
MAP_COUNT_BYTES = {0xDE: 2, 0xDF: 4}  # map16, map32: the bytes of the entry count after the first byte
# what a msgspec decode raises on bad bytes: ValidationError is a DecodeError, UnicodeDecodeError a ValueError, and
# nesting past the decoder's depth a RecursionError
DECODE_ERRORS = (msgspec.DecodeError, ValueError, RecursionError)
NOT_FINITE = str(FLOAT_MAX)  # in the bound a NaN or an inf fails: "Expected `float` >= -1.7976931348623157e+308"


class _Version(msgspec.Struct):
    """A header map's `v` alone: msgspec steps over every other entry in C (their keys must be str)."""

    v: msgspec.Raw = msgspec.Raw()  # empty: no `v`


VERSION_ONLY = msgspec.msgpack.Decoder(_Version)
INT = msgspec.msgpack.Decoder(int)


def excess_entries(where: str, buf: Any, fields: int) -> MessageError | None:
    """BAD_MESSAGE when `buf` holds a msgpack map of more entries than its struct's `fields`, each of them required:
    a key unknown or given twice (which msgspec would read as the last one), refused before any value is read."""
    view = memoryview(buf)
    first = view[0] if view.nbytes else 0
    size = MAP_COUNT_BYTES.get(first, 0)
    if 0x80 <= first <= 0x8F:
        entries = first & 0x0F
    elif size and view.nbytes > size:
        entries = int.from_bytes(view[1 : 1 + size], "big")
    else:
        return None  # not a map: the decoder says so
    if entries <= fields:
        return None
    return bad_message(f"{where}: {entries} entries, expected {fields} (a key unknown or given twice)")


def header_refusal(view: memoryview, error: Exception) -> MessageError:
    """The refusal of a header that did not decode into its structs, the decoder having raised `error`."""
    try:
        version = VERSION_ONLY.decode(view).v
    except DECODE_ERRORS as unreadable:
        return field_refusal("header", unreadable)
    try:
        number = INT.decode(version) if version else None
    except msgspec.ValidationError:  # not an int
        number = None
    if number is None:
        return bad_message("header: missing or non-int version 'v'")
    if number != PROTOCOL_VERSION:
        return version_refusal(number)
    return excess_entries("header", view, len(HEADER_KEYS)) or field_refusal("header", error)


def version_refusal(version: int) -> MessageError:
    supported = f"protocol version {version} is not supported (this end speaks {PROTOCOL_VERSION})"
    return MessageError(ErrorCode.BAD_VERSION, supported)


def field_refusal(where: str, error: Exception, struct: type[msgspec.Struct] | None = None) -> MessageError:
    """The refusal of the value msgspec refused with `error` while decoding what `where` names ("header",
    "INFER.body": then `struct`, the body's, names the values an enum field allows)."""
    if isinstance(error, RecursionError):
        return bad_message(f"{where}: nested deeper than the decoder reads")
    if not isinstance(error, msgspec.ValidationError):  # DecodeError, UnicodeDecodeError: not msgpack
        return bad_message(f"{where}: not valid msgpack: {str(error)[:200]}")
    what, _, location = str(error).partition(" - at ")
    key = location.startswith("`key` in ")
    path = location.removeprefix("`key` in ").strip("`").removeprefix("$").replace("[...]", "[]")
    at = f"{where}{path}{' key' if key else ''}"
    if what.startswith("Object "):  # a key missing or extra: "missing required field 'arrays'"
        return bad_message(f"{at}: " + what.removeprefix("Object ").replace("`", "'"))
    said = TYPE_NAME.sub(lambda name: MSGPACK_NAMES.get(name[1], name[1]), what)  # "Expected list of length <= 31"
    said = said[:1].lower() + said[1:]
    if WRONG_TYPE.fullmatch(what):
        return bad_message(f"{at}: {said}")
    if path == ".type":  # the tag of a header's union: a str that names no message type
        return bad_message(f"header: unknown message type {what.removeprefix('Invalid value ')}")
    if path.startswith(".arrays") and not (path.endswith(".dtype") and what.startswith("Invalid enum value")):
        return bad_message(f"{at}: {said}")  # an array descriptor describes its frame
    if what.startswith("Invalid enum value") and struct is not None and path.count(".") == 1 and "[" not in path:
        return bad_value(f"{at}: {what.removeprefix('Invalid enum value ')} is not one of {_allowed(struct, path)}")
    if NOT_FINITE in what:
        return bad_value(f"{at}: not a finite number")
    return bad_value(f"{at}: {said}")


def _allowed(struct: type[msgspec.Struct], path: str) -> list[str]:
    """The values the enum or Literal field at `path` (".schedule", a field of `struct`'s own) allows."""
    field_type = next(f.type for f in msgspec.structs.fields(struct) if f.name == path.strip("."))
    for option in get_args(field_type) if get_origin(field_type) in (Union, UnionType) else (field_type,):
        if get_origin(option) is Literal:
            return list(get_args(option))
        if isinstance(option, type) and issubclass(option, Enum):
            return [member.value for member in option]
    return []
