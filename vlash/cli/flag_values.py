"""How a flag reads its value (vlash.cli.flags): tyro's PrimitiveConstructorSpec of a field, from its type and its
metadata ("choices", "parse", "metavar", "optional_value"), and how a default reads on the command line."""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import Field
from pathlib import Path
from typing import Any, Literal

from tyro.constructors import PrimitiveConstructorSpec

UNIT_METAVARS = {"_ms": "MS", "_s": "S", "_hz": "HZ"}


def default_text(default: object) -> str:
    """How a default reads on the command line: a tuple as "0,2,4", a path as the path."""
    if isinstance(default, tuple | list):
        return ",".join(str(item) for item in default)
    return str(default)


def value_spec(field: Field, hint: Any, metavar: str) -> PrimitiveConstructorSpec:
    """How tyro reads one value of `field` (type `hint`): its parse, its choices, how its default reads."""
    optional = typing.get_origin(hint) in (typing.Union, type(int | None)) and type(None) in typing.get_args(hint)
    kind = next((arg for arg in typing.get_args(hint) if arg is not type(None)), hint) if optional else hint
    choices = tuple(map(str, field.metadata.get("choices", ())))
    if typing.get_origin(kind) is Literal:
        choices, kind = tuple(map(str, typing.get_args(kind))), str
    if typing.get_origin(kind) is tuple:
        parse = comma_separated(typing.get_args(kind)[0])
    elif kind in (int, float, str, Path):
        parse = field.metadata.get("parse", _typed(kind))
    else:
        raise TypeError(f"{field.name}: no command-line flag reads a {hint!r}")
    bare = field.metadata.get("optional_value")
    return PrimitiveConstructorSpec(
        nargs=1 if bare is None else (0, 1),
        metavar="{" + ",".join(choices) + "}" if choices else metavar,
        instance_from_str=lambda texts: bare if not texts else parse(texts[0]),
        is_instance=lambda value: True,
        str_from_instance=lambda value: [default_text(value)],
        choices=choices or None,
    )


def nothing_to_show(default: object) -> bool:
    """No default worth a "(default: ...)": unset, a switch that is off, an empty list or text."""
    return default is None or default is False or (isinstance(default, tuple | str) and not default)


def _typed(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"invalid {kind.__name__} value: {text!r}") from None

    return parse


def comma_separated(item: Callable[[str], Any]) -> Callable[[str], tuple]:
    """ "0,2,4" -> (0, 2, 4) (empty parts skipped)."""

    def parse(text: str) -> tuple:
        try:
            return tuple(item(part.strip()) for part in text.split(",") if part.strip())
        except ValueError:
            raise ValueError(f"expected comma-separated {item.__name__} values, got {text!r}") from None

    return parse


def metavar_of(name: str, kind: Any, metadata: Mapping[str, Any]) -> str:
    if "metavar" in metadata:
        return metadata["metavar"]
    if typing.get_origin(kind) is tuple or tuple in map(typing.get_origin, typing.get_args(kind)):
        return "A,B,..."
    kind = next((arg for arg in typing.get_args(kind) if arg is not type(None)), kind)
    unit = next((metavar for suffix, metavar in UNIT_METAVARS.items() if name.endswith(suffix)), None)
    return unit or {int: "N", float: "X", Path: "PATH"}.get(kind, name.upper())
