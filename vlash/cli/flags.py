"""The flags of a config dataclass, for tyro: the dataclass is the schema, its defaults and its `__post_init__`
checks are the only ones.

`ConfigFlags(ServerConfig, "bind max_batch")` is one group of a command's `--help`: one flag per field, named after
it (`--bind`, `--max-batch`; `prefix="openpi_"` gives OpenpiConfig.port the flag --openpi-port), typed by its
annotation (resolved by `typing.get_type_hints`), with its comment (vlash.dataclass_io.field_comments) as help and
its default as default. `section()` is what tyro parses for the group (vlash.cli.command); `build` makes the
config from the flags given on the command line, so a value is checked once, in the config, and its error names the
flag (`--max-batch must be an int in [1, 64], got 0`), not the field.

How a field reads its value (int, float, str, Path; `tuple[T, ...]` comma-separated, `0,2,4`; a bool as a switch:
`--compile`, or `--no-augment` for one that is on unless told; `bool | None` as `--x` / `--no-x`) can be refined by
the field's metadata: "choices" (a str field's values), "parse" (text -> value, raising ValueError), "flag" (another
spelling: `--from`), "aliases", "metavar", "repeatable" (a tuple given one item per flag: `--camera A --camera B`),
"positional", "optional_value" (the value of the bare flag: `--cuda-graphs` is `--cuda-graphs chunk`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import re
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, Field, fields
from typing import Annotated, Any, Generic, Literal, TypeVar

import tyro

from vlash.cli.flag_values import default_text, metavar_of, nothing_to_show, value_spec
from vlash.dataclass_io import field_comments
from vlash.errors import ConfigError

T = TypeVar("T")
ADVANCED = "advanced"  # the heading of a command's flags that are not what matters first
# "(vlash.server.jobs)" in a field's comment: for the code's readers, not in --help
MODULE_PATH = re.compile(r" ?\((?:[a-z_0-9]+\.)+(?!(?:json|yaml|npz|png|rrd)\))[a-z_0-9]+\)")
ON_FLAG_SUFFIX = "__on"  # the `--x` half of a `bool | None` field (its `--no-x` half is the field itself)


def field_default(field: Field) -> Any:
    """The field's default (a default_factory called); MISSING when it has none."""
    return field.default_factory() if field.default_factory is not MISSING else field.default


class ConfigFlags(Generic[T]):
    """The flags of some fields of one config dataclass (`names`, or one string of them separated by spaces; None:
    every field): --field-name, or --PREFIXfield-name. In --help they are shown under `title` (and `description`),
    those of `more` (title -> names) under their own titles, and the `advanced` ones under the command's "advanced"
    heading; `late`: this group's headings come after that one. `notes` are appended to a field's comment
    ("{default}" is the field's default); `help` replaces it."""

    def __init__(
        self,
        cls: type[T],
        names: Iterable[str] | str | None = None,
        prefix: str = "",
        title: str = "",
        description: str = "",
        notes: Mapping[str, str] | None = None,
        help: Mapping[str, str] | None = None,
        advanced: Iterable[str] | str = (),
        more: Mapping[str, Iterable[str] | str] | None = None,
        late: bool = False,
    ) -> None:
        self.cls, self.prefix, self.description, self.late = cls, prefix, description, late
        by_name = {f.name: f for f in fields(cls)}
        names = list(by_name) if names is None else _names(names)
        self.title_of = dict.fromkeys(names, title or cls.__name__)  # field -> the heading it is shown under
        for heading, more_names in (more or {}).items():
            self.title_of.update(dict.fromkeys(_names(more_names), heading))
        self.title_of.update(dict.fromkeys(_names(advanced), ADVANCED))
        unknown = [name for name in self.title_of if name not in by_name]
        if unknown:
            raise TypeError(f"{cls.__name__} has no fields {unknown}")
        self.fields = {name: by_name[name] for name in self.title_of}
        self.notes, self.help_texts = dict(notes or {}), dict(help or {})

    @property
    def titles(self) -> list[str]:
        """The headings its flags are shown under, in order."""
        return list(dict.fromkeys(self.title_of.values()))

    def dest(self, name: str) -> str:
        return self.prefix + name

    def flag(self, name: str) -> str:
        """The field's flag: --max-batch for max_batch; --no-augment for a bool that is on unless told."""
        field = self.fields[name]
        if "flag" in field.metadata:
            return field.metadata["flag"]
        flag = self.dest(name).replace("_", "-")
        return f"--no-{flag}" if field_default(field) is True and self.hint(name) is bool else f"--{flag}"

    def flags(self) -> dict[str, str]:
        """field -> flag, as error messages and help name them."""
        return {name: self.flag(name) for name in self.fields}

    def spellings(self) -> dict[str, str]:
        """Every spelling the command line may use (aliases, `--x` and `--no-x` of a `bool | None`) -> its dest."""
        found = {}
        for name, field in self.fields.items():
            found[self.flag(name)] = self.dest(name)
            for alias in field.metadata.get("aliases", ()):
                found[alias] = self.dest(name)
            if self.hint(name) == bool | None:
                found[f"--no-{self.dest(name).replace('_', '-')}"] = self.dest(name)
        return found

    def hint(self, name: str) -> Any:
        """The field's type, resolved in its class's module."""
        return field_type(self.cls, name)

    def section(self, title: str) -> list[tuple[str, Any, Any]]:
        """The (name, annotation, field) of the dataclass tyro parses for the flags shown under `title`."""
        return [spec for name, shown in self.title_of.items() if shown == title for spec in self._tyro_fields(name)]

    def values(self, sections: Mapping[str, Any]) -> dict[str, Any]:
        """dest -> value, read from `sections` (heading -> the instance of the dataclass of its `section`)."""
        found = {}
        for name, title in self.title_of.items():
            dest = self.dest(name)
            value = getattr(sections[title], dest)
            if self.hint(name) == bool | None:  # --x and --no-x: True, False, else the default (None)
                value = True if getattr(sections[title], dest + ON_FLAG_SUFFIX) else False if value else None
            found[dest] = value
        return found

    def _tyro_fields(self, name: str) -> list[tuple[str, Any, Any]]:
        field, hint, dest = self.fields[name], self.hint(name), self.dest(name)
        default = field_default(field)
        text = self.help(name, default)
        tyro_default = dataclasses.field() if default is MISSING else dataclasses.field(default=default)
        if hint == bool | None:  # two switches: --x (the `__on` field) and --no-x
            flag = dest.replace("_", "-")
            on = Annotated[bool, tyro.conf.arg(name=flag, help=text, help_behavior_hint="")]
            off = Annotated[bool, tyro.conf.arg(name=f"no-{flag}", help=f"turn off: {text}", help_behavior_hint="")]
            none = dataclasses.field(default=False)
            return [(dest + ON_FLAG_SUFFIX, on, none), (dest, off, dataclasses.field(default=False))]
        markers: list[Any] = []
        if hint is bool:
            hint_text = "(default: on)" if default else ""
            markers.append(tyro.conf.arg(help=f"turn off: {text}" if default else text, help_behavior_hint=hint_text))
            return [(dest, Annotated[bool, *markers], tyro_default)]
        metadata = field.metadata
        if metadata.get("repeatable"):
            item = typing.get_args(hint)[0]
            choices = tuple(metadata.get("choices", ()))
            kind = Literal[choices] if choices else item  # type: ignore[valid-type]
            hint_text = "(repeatable)"
            markers += [tyro.conf.UseAppendAction, self._arg(name, text, hint_text, metadata.get("metavar"))]
            return [(dest, Annotated[tuple[kind, ...], *markers], tyro_default)]
        markers.append(value_spec(field, hint, metavar_of(name, hint, metadata)))
        hint_text = "(required)" if default is MISSING else "" if nothing_to_show(default) else None
        if "default:" in text or "(default" in text:  # the help says it ("default: the policy's")
            hint_text = ""
        markers.append(self._arg(name, text, hint_text))
        if metadata.get("positional"):
            markers.append(tyro.conf.Positional)
        return [(dest, Annotated[hint, *markers], tyro_default)]

    def _arg(self, name: str, text: str, hint_text: str | None, metavar: str | None = None) -> Any:
        field = self.fields[name]
        return tyro.conf.arg(
            name=None if "flag" not in field.metadata else field.metadata["flag"].removeprefix("--"),
            help=text,
            help_behavior_hint=(lambda shown: f"(default: {shown})") if hint_text is None else hint_text,
            aliases=field.metadata.get("aliases"),
            metavar=metavar,
        )

    def help(self, name: str, default: Any) -> str:
        """The field's comment (or its `help`) with its fields named as flags, then its note."""
        comment = self.help_texts.get(name, field_comments(self.cls).get(name, ""))
        comment = re.sub(r"\bNone\b", "unset", MODULE_PATH.sub("", comment))  # the flag not given, not Python's None
        text = flag_message(comment, self.cls, self.flags(), at_start=False)
        note = self.notes.get(name, "").replace("{default}", default_text(default))
        return " ".join(part for part in (text, note) if part)

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


GIVEN = "flags_given"  # the Namespace attribute that lists the dests set on the command line


@functools.cache
def field_type(cls: type, name: str) -> Any:
    """The type of `cls`'s field `name`, resolved by `typing.get_type_hints` in the module of the class that declares
    it (alone: another field may name a type its module imports only for type checkers)."""
    owner = next(klass for klass in cls.__mro__ if name in vars(klass).get("__annotations__", {}))
    holder = type(owner.__name__, (), {"__annotations__": {name: owner.__annotations__[name]}})
    holder.__module__ = owner.__module__
    return typing.get_type_hints(holder)[name]


def _names(names: Iterable[str] | str) -> list[str]:
    return names.split() if isinstance(names, str) else list(names)


def given_dests(args: argparse.Namespace) -> set[str]:
    """The dests of the flags given on the command line (vlash.cli.command finds them in the arguments)."""
    return set(getattr(args, GIVEN, ()))


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
