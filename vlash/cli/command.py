"""One `vlash` command's command line, parsed by tyro from config dataclasses (vlash.cli.flags).

`Command("run", HELP, DESCRIPTION, (OPTIONS, EXECUTOR_FLAGS, RUN_FLAGS, ...))` shows each ConfigFlags as one group of
`--help`, in that order (the first ones are what matters; the rest comes under its own heading), and `parse` gives
the values as one flat `argparse.Namespace` (a flag's dest -> value) with `flags_given`, the dests set on the command
line (a value alone cannot say: it may equal the default). A bad argument is one line, `vlash CMD: error: ...`, like
every other setup error; so is a flag's old spelling (`vlash run: error: --fps is now --rate-hz`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NoReturn

import tyro
from tyro import _errors as tyro_errors  # tyro's parse-error hook (pinned in pyproject.toml: a private module)

from vlash.cli.flags import ADVANCED, GIVEN, ConfigFlags

ADVANCED_NOTE = "the rest: their defaults suit a first run"
HELP_NOTE = "(`{prog} --help` lists the options)"


@dataclasses.dataclass(frozen=True)
class Command:
    """A command: its name, its help line (`vlash --help`), its description, its groups of flags, the old spellings
    of renamed flags (old -> new), pairs of flags that exclude each other or of which one is required, and what --help
    says under its "advanced" heading."""

    name: str
    help: str
    description: str
    groups: tuple[ConfigFlags, ...]
    renamed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    exclusive: tuple[tuple[str, str], ...] = ()  # dests: at most one of the two given
    required_one_of: tuple[tuple[str, str], ...] = ()  # dests: one of the two given
    advanced_note: str = ADVANCED_NOTE  # what --help says under the "advanced" heading

    @property
    def prog(self) -> str:
        return f"vlash {self.name}"

    def error(self, message: str) -> NoReturn:
        """`vlash CMD: error: MESSAGE`, one line on stderr, and exit status 2 (as argparse's errors)."""
        print(f"{self.prog}: error: {message} {HELP_NOTE.format(prog=self.prog)}", file=sys.stderr)
        raise SystemExit(2)

    def spellings(self) -> dict[str, str]:
        """Every flag of the command -> its dest."""
        return {flag: dest for group in self.groups for flag, dest in group.spellings().items()}

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        """The values of `argv` (the command's arguments), every dest of every group, and `flags_given`."""
        argv = list(argv)
        for token in argv:
            old = token.partition("=")[0]
            if old in self.renamed:
                self.error(f"{old} is now {self.renamed[old]}")
        with tyro_errors.on_parse_error(self._refuse):
            parsed = tyro.cli(self.spec(), args=argv, prog=self.prog, description=self.description,
                              config=(tyro.conf.FlagCreatePairsOff,))  # fmt: skip
        sections = {title: getattr(parsed, self._section(title)) for title in self.titles()}
        values: dict[str, Any] = {}
        for group in self.groups:
            values.update(group.values(sections))
        spellings = self.spellings()
        given = {spellings[flag] for flag in map(_flag_of, argv) if flag in spellings}
        given |= {dest for dest, value in values.items() if dest in self.positional() and value is not None}
        for first, second in self.exclusive:
            if {first, second} <= given:
                self.error(f"argument {self._flag(second)}: not allowed with argument {self._flag(first)}")
        for first, second in self.required_one_of:
            if not {first, second} & given:
                self.error(f"one of the arguments {self._flag(first)} {self._flag(second)} is required")
        return argparse.Namespace(**values, **{GIVEN: given})

    def positional(self) -> set[str]:
        return {group.dest(name) for group in self.groups for name, f in group.fields.items()
                if f.metadata.get("positional")}  # fmt: skip

    def _flag(self, dest: str) -> str:
        return next(flag for flag, found in self.spellings().items() if found == dest)

    def titles(self) -> list[str]:
        """The headings of --help, in order: the groups' (groups share a heading of the same title), "advanced",
        then the late groups'."""
        early = [title for group in self.groups if not group.late for title in group.titles if title != ADVANCED]
        late = [title for group in self.groups if group.late for title in group.titles if title != ADVANCED]
        advanced = [ADVANCED] if any(ADVANCED in group.titles for group in self.groups) else []
        return list(dict.fromkeys([*early, *advanced, *late]))

    def _section(self, title: str) -> str:
        return f"section_{self.titles().index(title)}"

    def spec(self) -> type:
        """The dataclass tyro parses: one field per heading, holding the flags shown under it, named without a
        prefix."""
        specs = []
        for title in self.titles():
            fields = [spec for group in self.groups for spec in group.section(title)]
            kind = dataclasses.make_dataclass(f"{self.name.title()}{self._section(title).title()}", fields,
                                              frozen=True)  # fmt: skip
            notes = [group.description for group in self.groups if title in group.titles and group.description]
            kind.__doc__ = self.advanced_note if title == ADVANCED else next(iter(notes), "")
            specs.append((self._section(title), Annotated[kind, tyro.conf.OmitArgPrefixes, tyro.conf.arg(name=title)]))
        return dataclasses.make_dataclass(f"{self.name.title()}Command", specs, frozen=True)

    def _refuse(self, event: tyro_errors.ParseErrorEvent) -> None:
        """tyro's parse error as one line."""
        self.error(_message(event))


def _flag_of(token: str) -> str:
    return token.partition("=")[0] if token.startswith("--") else ""


def _message(event: tyro_errors.ParseErrorEvent) -> str:
    """What went wrong, as argparse says it."""
    if isinstance(event, tyro_errors.UnrecognizedArgs):
        return f"unrecognized arguments: {' '.join(event.tokens)}"
    if isinstance(event, tyro_errors.MissingArgs):
        names = ", ".join(arg.arg.display_name() for arg in event.missing_arguments)
        return f"the following arguments are required: {names}"
    if isinstance(event, tyro_errors.InvalidChoice):
        choices = ", ".join(map(repr, event.choices))
        return f"argument {event.argument.display_name()}: invalid choice: {event.value!r} (choose from {choices})"
    if isinstance(event, tyro_errors.BadValue):
        return f"argument {event.argument.display_name()}: expected one value"
    if isinstance(event, tyro_errors.InstantiationFailure):
        where = f"argument {event.argument.display_name()}: " if event.argument is not None else ""
        return where + event.message.strip().splitlines()[0]
    return type(event).__name__  # a failure tyro added after this was written: its name, in one line
