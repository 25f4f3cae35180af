"""Command-line flags generated from config dataclasses: the dataclass is the schema, its defaults and its
`__post_init__` checks are the only ones.

`ConfigFlags(ServerConfig, ("bind", "max_batch"))` adds one flag per field, named after it (`--bind`,
`--max-batch`; `prefix="openpi_"` gives OpenpiConfig.port the flag --openpi-port). A flag parses its field's type
(int, float, str, Path, bool, tuple[T, ...] written comma-separated; a `Literal` or `metadata={"choices": ...}`
shows its values) and checks nothing else; its help is the field's comment (vlash.dataclass_io.field_comments) and
its default is the field's. `build` makes the config from the flags given, so a value is checked once, in the
config, and its error names the flag (`--max-batch must be an int in [1, 64], got 0`), not the field.

A flag whose spelling changed stays known for one purpose: `add_renamed_flags` refuses it in one line naming the new
spelling (`vlash run: error: --fps is now --rate-hz`).
"""

from __future__ import annotations

import argparse
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, fields
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from vlash.cli.help_format import default_text
from vlash.dataclass_io import field_comments
from vlash.errors import ConfigError

T = TypeVar("T")
GIVEN = "flags_given"  # the Namespace attribute that lists the dests set on the command line
UNIT_METAVARS = {"_ms": "MS", "_s": "S", "_hz": "HZ"}


class _RecordsGiven:
    """Remembers in the Namespace that its flag was given (the value alone cannot say: it may equal the default)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        super().__call__(parser, namespace, values, option_string)
        setattr(namespace, GIVEN, {*getattr(namespace, GIVEN, ()), self.dest})


class StoreGiven(_RecordsGiven, argparse._StoreAction):
    """`store`, recording that the flag was given (`given_dests`); hand-written flags may use it too."""


class SwitchGiven(_RecordsGiven, argparse._StoreConstAction):
    """A flag without a value that stores its `const` (--compile: True; --no-augment: False)."""


class BooleanGiven(_RecordsGiven, argparse.BooleanOptionalAction):
    """--x / --no-x, for a `bool | None` field (None: neither given)."""


def given_dests(args: argparse.Namespace) -> set[str]:
    """The dests of the flags given on the command line (StoreGiven, SwitchGiven, BooleanGiven)."""
    return set(getattr(args, GIVEN, ()))


class RenamedFlag(argparse.Action):
    """A flag's old spelling: refused in one line that names the new one."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "") -> None:
        super().__init__(
            option_strings, argparse.SUPPRESS, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        parser.error(f"{option_string} is now {self.new}")


def add_renamed_flags(parser: argparse.ArgumentParser, renamed: Mapping[str, str]) -> None:
    """Refuse each old spelling of `renamed` (old flag -> its new spelling, e.g. "--no-adapt-delay")."""
    for old, new in renamed.items():
        parser.add_argument(old, action=RenamedFlag, new=new)


@dataclass(frozen=True)
class FlagType:
    """How a field's flag reads its value."""

    parse: Callable[[str], Any] | None  # text -> value; None: a switch (the field is a bool)
    optional: bool  # None is one of the field's values
    choices: tuple[str, ...] = ()  # shown in --help (the config checks them)
    metavar: str | None = None


def flag_type(cls: type, field: Field) -> FlagType:
    """The FlagType of `field`'s annotation (resolved in `cls`'s module); TypeError for a type no flag can give."""
    hint = field.type
    if isinstance(hint, str):
        hint = eval(hint, vars(sys.modules[cls.__module__]))  # the class's own annotation, in its module
    args = typing.get_args(hint)
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args
    if optional:
        (hint,) = [arg for arg in args if arg is not type(None)]
    choices = tuple(field.metadata.get("choices", ()))
    if typing.get_origin(hint) is Literal:
        choices, hint = typing.get_args(hint), str
    if hint is bool:
        return FlagType(None, optional)
    if choices:
        return FlagType(str, optional, tuple(map(str, choices)), "{" + ",".join(map(str, choices)) + "}")
    if typing.get_origin(hint) is tuple and typing.get_args(hint)[1:] == (Ellipsis,):
        item = typing.get_args(hint)[0]
        return FlagType(comma_separated(item), optional, metavar="A,B,...")
    if hint in (int, float, str, Path):
        return FlagType(hint, optional, metavar=_metavar(field.name, hint))
    raise TypeError(f"{cls.__name__}.{field.name}: no command-line flag reads a {hint!r}")


def comma_separated(item: Callable[[str], Any]) -> Callable[[str], tuple]:
    """argparse type: "0,2,4" -> (0, 2, 4) (empty parts skipped)."""

    def parse(text: str) -> tuple:
        try:
            return tuple(item(part.strip()) for part in text.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {item.__name__} values, got {text!r}") from None

    return parse


def _metavar(name: str, kind: type) -> str:
    unit = next((metavar for suffix, metavar in UNIT_METAVARS.items() if name.endswith(suffix)), None)
    return unit or {int: "N", float: "X", Path: "PATH"}.get(kind, name.upper())


def field_default(field: Field) -> Any:
    """The field's default (a default_factory called); MISSING when it has none."""
    return field.default_factory() if field.default_factory is not MISSING else field.default


class ConfigFlags(Generic[T]):
    """The flags of some fields of one config dataclass (`names`, or one string of them separated by spaces), flat:
    --field-name, or --PREFIXfield-name."""

    def __init__(
        self, cls: type[T], names: Iterable[str] | str, prefix: str = "", notes: Mapping[str, str] | None = None
    ) -> None:
        self.cls, self.prefix = cls, prefix
        names = names.split() if isinstance(names, str) else tuple(names)
        by_name = {f.name: f for f in fields(cls)}
        unknown = [name for name in names if name not in by_name]
        if unknown:
            raise TypeError(f"{cls.__name__} has no fields {unknown}")
        self.fields = {name: by_name[name] for name in names}
        self.notes = dict(notes or {})  # field -> help appended to its comment; "{default}" is the field's default

    def dest(self, name: str) -> str:
        return self.prefix + name

    def flag(self, name: str) -> str:
        """The field's flag: --max-batch for max_batch; --no-augment for a bool that is on unless told."""
        flag = self.dest(name).replace("_", "-")
        field = self.fields[name]
        switched_off = field_default(field) is True and flag_type(self.cls, field) == FlagType(None, False)
        return f"--no-{flag}" if switched_off else f"--{flag}"

    def flags(self) -> dict[str, str]:
        """field -> flag, as error messages and help name them."""
        return {name: self.flag(name) for name in self.fields}

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        """One flag per field (`parser` may be an argument group)."""
        for name, field in self.fields.items():
            self._add(parser, name, field)

    def _add(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup, name: str, field: Field) -> None:
        kind, default, flag = flag_type(self.cls, field), field_default(field), self.flag(name)
        help_text = self.help(name, default)
        dest = self.dest(name)
        if kind.parse is not None:
            required = default is MISSING
            parser.add_argument(flag, action=StoreGiven, dest=dest, type=kind.parse, metavar=kind.metavar,
                                default=None if required else default, required=required, help=help_text)  # fmt: skip
        elif kind.optional:
            parser.add_argument(flag, action=BooleanGiven, dest=dest, default=default, help=help_text)
        elif default:  # on unless told: the flag (--no-NAME) turns it off
            parser.add_argument(flag, action=SwitchGiven, dest=dest, const=False, default=True,
                                help=f"turn off: {help_text} (default: on)")  # fmt: skip
        else:
            parser.add_argument(flag, action=SwitchGiven, dest=dest, const=True, default=False, help=help_text)

    def help(self, name: str, default: Any) -> str:
        """The field's comment with its fields named as flags, then its note."""
        text = flag_message(field_comments(self.cls).get(name, ""), self.cls, self.flags(), at_start=False)
        note = self.notes.get(name, "").replace("{default}", default_text(default))
        return " ".join(part for part in (text, note) if part).replace("%", "%%")

    def given(self, args: argparse.Namespace) -> dict[str, Any]:
        """field -> value of the flags given on the command line (the others keep the config's default)."""
        given = given_dests(args)
        return {name: getattr(args, self.dest(name)) for name in self.fields if self.dest(name) in given}

    def value(self, args: argparse.Namespace, name: str) -> Any:
        """The flag's value: given, else the field's default."""
        return getattr(args, self.dest(name))

    def build(self, args: argparse.Namespace, /, **fixed: Any) -> T:
        """The config of the flags given (and `fixed`, the values the command sets itself); its errors name flags."""
        return build_config(self.cls, {**self.given(args), **fixed}, self.flags())


def build_config(cls: type[T], values: Mapping[str, Any], flags: Mapping[str, str]) -> T:
    """`cls(**values)`; a ConfigError / ValueError of its checks becomes one ConfigError that names `flags`."""
    try:
        return cls(**values)
    except ValueError as exc:  # ConfigError is one; robot_io's configs raise ValueError
        raise ConfigError(flag_message(str(exc), cls, flags)) from None


def flag_message(message: str, cls: type, flags: Mapping[str, str], at_start: bool = True) -> str:
    """`message` (a config's error or comment) with each field of `flags` named as its flag: `Class.field`
    anywhere (the config's own, or another `...Config`'s field of the same name: one it builds), a snake_case or
    `quoted` field anywhere, and with `at_start` a one-word field that starts the message (an error's subject)."""
    text = re.sub(rf"^{cls.__name__}: ", "", message)
    for name, flag in flags.items():
        text = re.sub(rf"\b(?:{cls.__name__}|\w+Config)\.{name}\b", flag, text)  # this config's, or one it builds
        text = text.replace(f"`{name}`", f"`{flag}`")
        if "_" in name:
            text = re.sub(rf"(?<![\w./-]){name}(?![\w/-])", flag, text)
        elif at_start:
            text = re.sub(rf"^{name}\b", flag, text)
    return text
