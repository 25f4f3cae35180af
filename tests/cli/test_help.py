"""`--help` shows every real default and no "(default: None)"; a bad argument is one line that points to the
command's own --help; `vlash --version`; output into a closed pipe ends quietly."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

import vlash
from vlash.cli.help_format import DefaultsHelpFormatter, default_text, has_default
from vlash.cli.main import COMMANDS, SIGPIPE_STATUS, command_parser, main


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


@pytest.mark.parametrize("argv", [["bench", "--steps", "zero"], ["eval", "--task", "reach"], ["nope"]])
def test_a_bad_argument_is_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and err.count("\n") == 0 and ": error: " in err and "--help" in err, err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["export", "--policy", "pi05-tiny", "--out", "x", "--bogus", "1"], "unrecognized arguments: --bogus 1"),
        (["serve", "--policy", "pi05-tiny", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["export"], "the following arguments are required"),
    ],
)
def test_a_commands_bad_argument_points_to_its_own_help(argv, says, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and err.startswith(f"vlash {argv[0]}: error: ") and says in err, err
    assert err.endswith(f"(`vlash {argv[0]} --help` lists the options)"), err


def test_output_into_a_closed_pipe_ends_quietly():
    """`vlash info --json | head`: a reader that went away is no traceback; the status is a shell's for SIGPIPE."""
    read, write = os.pipe()
    os.close(read)  # gone before the command writes: its first flush fails, on any machine
    try:
        run = subprocess.run(
            [sys.executable, "-m", "vlash.cli.main", "info", "--json", "--policy", "pi05-tiny"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert run.returncode == SIGPIPE_STATUS and run.stderr == "", run.stderr[-2000:]
