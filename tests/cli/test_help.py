"""`--help` shows every real default and no "(default: None)"; a bad argument is one line; `vlash --version`."""

from __future__ import annotations

import argparse

import pytest

import vlash
from vlash.cli.help_format import DefaultsHelpFormatter, default_text, has_default
from vlash.cli.main import COMMANDS, command_parser, main


def _command(name: str) -> argparse.ArgumentParser:
    return command_parser(name)._subparsers._group_actions[0].choices[name]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_each_real_default_and_no_empty_ones(name):
    parser = _command(name)
    text = " ".join(parser.format_help().split())  # unwrapped
    assert "(default: None)" not in text and "(default: False)" not in text
    for action in parser._actions:
        if not has_default(action) or action.help == argparse.SUPPRESS:
            continue
        formatter = DefaultsHelpFormatter(parser.prog)
        line = " ".join(formatter._format_action(action).split())
        stated = action.help is not None and ("default:" in action.help or "(default" in action.help)
        assert stated or f"(default: {default_text(action.default)})" in line, f"{name}: {line}"


def test_known_defaults_read_as_on_the_command_line():
    serve = " ".join(_command("serve").format_help().split())
    assert "(default: tcp://127.0.0.1:5555)" in serve and "all CPU cores but one" in serve
    evaluate = " ".join(_command("eval").format_help().split())
    assert "(default: 0,2,4)" in evaluate and "(default: 50)" in evaluate


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.strip() == f"vlash {vlash.__version__}"


@pytest.mark.parametrize("argv", [["bench", "--steps", "0"], ["eval", "--task", "reach"], ["nope"]])
def test_a_bad_argument_is_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and err.count("\n") == 0 and ": error: " in err and "--help" in err, err
