"""`--help` that shows each option's real default.

argparse's ArgumentDefaultsHelpFormatter appends "(default: None)" / "(default: False)" to every option without
one, which reads as noise beside the options whose default matters. This appends the default only when there
is one to show, and leaves help texts that already state it ("(default: the policy's)", "default: 3") alone.
"""

from __future__ import annotations

import argparse
import copy
from typing import NoReturn

HIDDEN_DEFAULTS = (None, False, argparse.SUPPRESS)  # no default to show: unset, a flag that is off, suppressed


def default_text(default: object) -> str:
    """How a default reads on the command line: a tuple as "0,2,4", a path as the path."""
    if isinstance(default, tuple | list):
        return ",".join(str(item) for item in default)
    return str(default)


def has_default(action: argparse.Action) -> bool:
    """An option with a default worth showing (not unset, not an off flag, not suppressed)."""
    return bool(action.option_strings) and not any(action.default is hidden for hidden in HIDDEN_DEFAULTS)


class DefaultsHelpFormatter(argparse.HelpFormatter):
    def _format_action(self, action: argparse.Action) -> str:
        if action.help is None and has_default(action):  # argparse writes no help line for an option without help
            action = copy.copy(action)
            action.help = _default_note(action)
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.help == argparse.SUPPRESS or not has_default(action) or "default:" in text or "(default" in text:
            return action.help
        return f"{text} {_default_note(action)}"


def _default_note(action: argparse.Action) -> str:
    return f"(default: {default_text(action.default).replace('%', '%%')})"  # help strings are %-formatted


class CommandParser(argparse.ArgumentParser):
    """The parser of every `vlash` command (its sub-parsers are of this class too): defaults in --help, and a bad
    argument is one line, `vlash CMD: error: ...` like every other setup error, not a usage block first."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")
