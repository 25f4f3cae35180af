"""Why a header frame is refused: its ErrorCode and one line naming the field, for a header that did not decode into
its message type's structs (wire.py), or that holds a key twice. This runs only for a refused header.

A refusal costs less than a valid request (docs/STYLE.md 16): the header is never decoded whole again. It is
explained stage by stage, each stage a typed msgspec decode in C of only what it needs, the rest left a msgspec.Raw
that msgspec steps over without building anything inside it (a map's entries are read so, and a list's or a map's
length from its first bytes, before any item: msgpack_items.py). So a refusal builds a bounded number of Python
objects, however many items a container of the header holds. The stages, in the protocol's order whatever order the
sender wrote the keys in (docs/PROTOCOL.md, "Error codes"): the header is a msgpack map with str keys; then `v`
(BAD_VERSION whatever the rest holds, so a later version may change the rest freely); then the header's keys (one
missing, extra or twice) and type; then the body's keys (the same), and its fields in their declared order
(messages.py), each decoded with its own type, a list or a map checked for its length before its items and a
map's keys before its values (a `Unique` list then for its items' keys); then the descriptor count, and each
descriptor followed by the checks of its frame (arrays.py). A field of the wrong msgpack type, or a key missing,
extra or twice, is BAD_MESSAGE; the right type with a value out of bounds BAD_VALUE. A map inside the body or a
descriptor may hold a key twice, as msgspec reads it: every value is checked, the last one kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
from msgspec import Meta

from robot_io.protocol.arrays import received_arrays
from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import PROTOCOL_VERSION, ErrorCode, MessageError, MessageType, Unique, bad_message
from robot_io.protocol.msgpack_items import PYTHON_NAMES, RAW_LIST, count, entries, kind
from robot_io.protocol.refusal_fields import decoded, descriptor, field_refusal, map_entries, scalar_value
from robot_io.protocol.wire import HEADER_KEYS, check_unique, header_types, marks

# The deepest a valid header nests: header > body > cameras > one camera, or header > arrays > descriptor > shape.
MAX_HEADER_DEPTH = 4
HEADER_ORDER = ("v", "type", "body", "arrays")
STR = msgspec.msgpack.Decoder(str)
INT = msgspec.msgpack.Decoder(int)


class _Version(msgspec.Struct):
    """A header map's `v` alone: msgspec steps over every other entry in C (their keys must be str)."""

    v: msgspec.Raw = msgspec.Raw()  # empty: no `v`


VERSION_ONLY = msgspec.msgpack.Decoder(_Version)


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


def _check_in_order(view: memoryview, views: Sequence[memoryview], limits: Limits) -> None:
    listed = map_entries("header", view)
    if type(listed) is int:  # too many entries to list: `v` from a decode that steps over the rest
        _check_version(_version_only(view))
        raise bad_message(f"header: expected keys {sorted(HEADER_KEYS)}, got a map of {listed} entries")
    _check_version(dict(listed).get("v"))  # the last `v`, as the typed decode reads a key given twice
    header = _unique_keys("header", listed, HEADER_ORDER)
    mtype = _message_type(header["type"])
    _check_struct(f"{mtype.value}.body", header["body"], header_types(limits).bodies[mtype], unique=True)
    frames, descriptors = len(views) - 1, header["arrays"]
    found = count(descriptors) if kind(descriptors) == "list" else None
    if found is None or found[0] != frames:
        raise bad_message(f"arrays: expected a list of {frames} descriptors (one per array frame)")
    items = decoded("arrays", descriptors, RAW_LIST.decode)
    # each descriptor is checked just before its frame (a generator: received_arrays takes one at a time)
    received_arrays(mtype, (descriptor(i, raw) for i, raw in enumerate(items)), views[1:], limits)


def _version_only(view: memoryview) -> msgspec.Raw:
    try:
        return VERSION_ONLY.decode(view).v
    except msgspec.ValidationError:  # the one thing it validates: the keys it steps over are str
        raise bad_message("header: a map key that is not a str") from None
    except RecursionError:
        raise bad_message("header: nested deeper than the decoder reads") from None
    except (msgspec.DecodeError, ValueError) as exc:
        raise bad_message(f"header: not valid msgpack: {str(exc)[:200]}") from None


def _check_version(raw: msgspec.Raw | None) -> None:
    if raw is None or kind(raw) != "int":
        raise bad_message("header: missing or non-int version 'v'")
    version = INT.decode(raw)
    if version != PROTOCOL_VERSION:
        raise version_refusal(version)


def _message_type(raw: msgspec.Raw) -> MessageType:
    name = decoded("header.type", raw, STR.decode) if kind(raw) == "str" else None
    mtype = MessageType._value2member_map_.get(name)
    if mtype is None:
        what = repr(name[:32]) if name is not None else PYTHON_NAMES[kind(raw)]
        raise bad_message(f"header: unknown message type {what}")
    return mtype


def _unique_keys(where: str, listed: list[tuple[str, msgspec.Raw]], names: Sequence[str]) -> dict[str, msgspec.Raw]:
    """The map's values by key: exactly `names` (else BAD_MESSAGE naming the keys), none twice (else the key)."""
    _same_keys(where, listed, names)
    seen: set[str] = set()
    for key, _ in listed:
        if key in seen:
            raise bad_message(f"{where}: duplicate key {key[:64]!r}")
        seen.add(key)
    return dict(listed)


def _same_keys(where: str, listed: list[tuple[str, msgspec.Raw]], names: Sequence[str]) -> None:
    keys = {key for key, _ in listed}
    if keys != set(names):
        raise bad_message(f"{where}: expected keys {sorted(names)}, got {sorted(key[:64] for key in keys)[:16]}")


def _check_struct(where: str, raw: msgspec.Raw, struct: type[msgspec.Struct], unique: bool = False) -> None:
    """A map with exactly the struct's keys (`unique`: each once), then each field in the struct's order."""
    fields = msgspec.structs.fields(struct)
    names = [field.name for field in fields]
    listed = map_entries(where, raw)
    if type(listed) is int:
        raise bad_message(f"{where}: expected keys {sorted(names)}, got a map of {listed} entries")
    (_unique_keys if unique else _same_keys)(where, listed, names)
    for field in fields:
        for key, value in listed:  # every value of the key, as msgspec checks each (and keeps the last)
            if key == field.name:
                _check_value(f"{where}.{field.name}", value, field.type)
        for unique in (mark for mark in marks(field.type) if isinstance(mark, Unique)):  # before the next field
            at, items = f"{where}.{field.name}", decoded(where, dict(listed)[field.name], RAW_LIST.decode)
            check_unique(at, unique, [_last(at, item, unique.key) for item in items])


def _last(where: str, raw: msgspec.Raw, key: str) -> str:
    """The last value of `key` in the map in `raw` (a camera, checked already)."""
    listed = map_entries(where, raw)
    return decoded(where, [value for name, value in listed if name == key][-1], STR.decode)


def _check_value(where: str, raw: msgspec.Raw, field_type: Any) -> None:
    """A list or a map is checked itself (type, length) before its items; a map's keys before its values."""
    annotated = get_origin(field_type) is Annotated
    base, bounds = (get_args(field_type)[0], get_args(field_type)[1:]) if annotated else (field_type, ())
    container = get_origin(base)
    if container not in (list, dict):
        decoded(where, raw, _decoder(field_type).decode, _allowed(field_type))
        return
    want = "list" if container is list else "map"
    length = count(raw) if kind(raw) == want else None
    if length is None:
        raise bad_message(f"{where}: expected {want}, got {PYTHON_NAMES[kind(raw)]}")
    limit = min((m.max_length for m in bounds if isinstance(m, Meta) and m.max_length is not None), default=None)
    if limit is not None and length[0] > limit:
        raise field_refusal(where, raw, f"Expected `{'array' if container is list else 'object'}` of length <= {limit}")
    if container is list:
        for i, item in enumerate(decoded(where, raw, RAW_LIST.decode)):
            _check_struct(f"{where}[{i}]", item, get_args(base)[0])  # the one list of a body: METADATA's cameras
        return
    key_type, value_type = get_args(base)
    items = decoded(where, raw, lambda buf: entries(buf, *length))
    for key in items[0::2]:
        decoded(f"{where} key", key, _decoder(key_type).decode)
    for key, value in zip(items[0::2], items[1::2], strict=True):
        decoded(f"{where}[{scalar_value(key)!r}]", value, _decoder(value_type).decode)


def _allowed(field_type: Any) -> str:
    """How a refusal names the values of a Literal or an enum field (whatever else its type allows)."""
    for option in get_args(field_type) if get_origin(field_type) in (Union, UnionType) else (field_type,):
        if get_origin(option) is Literal:
            return f"one of {list(get_args(option))}"
        if isinstance(option, type) and issubclass(option, Enum):
            return f"an {option.__name__}"
    return "a valid value"


_DECODERS: dict[Any, msgspec.msgpack.Decoder] = {}


def _decoder(value_type: Any) -> msgspec.msgpack.Decoder:
    """A decoder of one field's type, made once (types are built per Limits: a few hundred kept at most)."""
    found = _DECODERS.get(value_type)
    if found is None:
        if len(_DECODERS) >= 512:
            _DECODERS.clear()
        found = _DECODERS[value_type] = msgspec.msgpack.Decoder(value_type)
    return found
