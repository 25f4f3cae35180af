"""Typed values for SimSettings: YAML values checked against the config dataclasses' field types, named by key."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from vlash.sim.errors import SimConfigError

TYPE_WORDS = {float: "a number", int: "an int", str: "a string", bool: "true or false"}


def coerce(value: Any, hint: Any, key: str) -> Any:
    """`value` (parsed YAML) as type `hint` (float, int, str, bool, tuple[...], unions of them); SimConfigError
    naming `key` when it does not fit. Ints are accepted as floats, lists as tuples; bools are never numbers."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint in (int, str, bool):
        if isinstance(value, hint) and (hint is bool or not isinstance(value, bool)):
            return value
    elif origin is tuple:
        return _coerce_tuple(value, args, key)
    elif origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (arg for arg in args if arg is not type(None)):
            try:
                return coerce(value, option, key)
            except SimConfigError:
                continue
    else:  # a type this module does not know: the config's own checks judge the value
        return value
    raise SimConfigError(f"setting {key!r} must be {_describe(hint)}, got {value!r}")


def _coerce_tuple(value: Any, args: tuple, key: str) -> tuple:
    if not isinstance(value, list | tuple):
        raise SimConfigError(f"setting {key!r} must be a list ({_describe(tuple[args])}), got {value!r}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(coerce(item, args[0], f"{key}[{i}]") for i, item in enumerate(value))
    if len(value) != len(args):
        raise SimConfigError(f"setting {key!r} must be a list of {len(args)} values, got {value!r}")
    return tuple(coerce(item, arg, f"{key}[{i}]") for i, (item, arg) in enumerate(zip(value, args, strict=True)))


def _describe(hint: Any) -> str:
    if hint in TYPE_WORDS:
        return TYPE_WORDS[hint]
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_describe(args[0])} values"
        return "a list of " + ", ".join(_describe(arg) for arg in args)
    return " or ".join(_describe(arg) for arg in args) if args else getattr(hint, "__name__", str(hint))


def apply_fields(base: Any, values: dict[str, Any], prefix: str, owner: str) -> Any:
    """`base` (a frozen config dataclass) with `values` (field -> raw value) applied; unknown fields, wrong types
    and values its checks refuse raise SimConfigError naming `prefix + field` and `owner`."""
    if not values:
        return base
    names = [f.name for f in dataclasses.fields(base)]
    unknown = [key for key in values if key not in names]
    if unknown:
        known = ", ".join(prefix + name for name in names)
        raise SimConfigError(f"{owner}: unknown setting {prefix + unknown[0]!r}; known: {known}")
    hints = typing.get_type_hints(type(base))
    try:
        coerced = {key: coerce(value, hints[key], prefix + key) for key, value in values.items()}
    except SimConfigError as exc:
        raise SimConfigError(f"{owner}: {exc}") from None
    try:
        return dataclasses.replace(base, **coerced)
    except SimConfigError as exc:
        named = [prefix + key for key in coerced if key in str(exc)] or [prefix + key for key in coerced]
        raise SimConfigError(f"{owner}: setting {', '.join(map(repr, named))}: {exc}") from None


def plain(value: Any) -> Any:
    """Tuples as lists, recursively (for JSON and YAML)."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value
