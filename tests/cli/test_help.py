"""`--help` groups each command's flags by the config they belong to, shows every real default and no "(default:
None)", names no internal code, and puts what matters first (one screen) with the rest under "advanced"; a bad
argument is one line that points to the command's own --help; `vlash --version`; output into a closed pipe ends
quietly."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import vlash
from vlash.cli.flag_values import default_text
from vlash.cli.flags import field_default
from vlash.cli.main import COMMANDS, SIGPIPE_STATUS, command_of, main

SCREEN = 60  # lines of a terminal 100 columns wide that the help shows before its "advanced" heading
# words of the code, not of the product, that a help text must not show (issue 43 found these)
INTERNAL = re.compile(
    r"\b[A-Z][a-z]+[A-Za-z]*\.[a-z_]+\b"  # Class.field: Episode.tail, PolicyRuntime.max_batch
    r"|\b[A-Z][a-z]+(?:[A-Z][a-z]+)+\b"  # a class: SampleSpec
    r"|\bcheck_[a-z_]+|\b(?:train|vlash|robot_io)\.[a-z_.]+"  # check_unauthenticated, train.vision_aux
)
KNOWN_NAMES = {"DeltaActions", "CurveZMQ", "ZeroMQ", "LeRobot", "PaliGemma", "AdamW"}  # what users meet elsewhere


def help_text(name: str, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as exited:
        main([name, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def unboxed(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


@pytest.fixture(autouse=True)
def keep_the_thread_wait_policy(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # parsing `vlash serve` would set it for this whole process


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_each_real_default_and_no_empty_ones(name, capsys, monkeypatch):
    text = unboxed(help_text(name, capsys, monkeypatch))
    assert "(default: None)" not in text and "(default: False)" not in text and "(default: )" not in text
    for group in command_of(name).groups:
        for field_name, field in group.fields.items():
            if field.metadata.get("positional"):
                continue
            assert group.flag(field_name) in text, f"{name}: {group.flag(field_name)} is not in --help"
            default = field_default(field)
            shown = isinstance(default, int | float | str) and not isinstance(default, bool) and default != ""
            if shown and "default" not in group.help(field_name, default):
                assert f"(default: {default_text(default)})" in text, f"{name}: {group.flag(field_name)}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_names_no_internal_code(name, capsys, monkeypatch):
    options = help_text(name, capsys, monkeypatch).split(" options", 1)[1]  # the flags, not the description
    found = set(INTERNAL.findall(unboxed(options))) - KNOWN_NAMES
    assert not found, f"vlash {name} --help names {found}"


@pytest.mark.parametrize("name", ["run", "train", "bench", "eval", "demo", "serve", "quantize"])
def test_help_is_grouped_by_config_and_what_matters_fits_one_screen(name, capsys, monkeypatch):
    text = help_text(name, capsys, monkeypatch)
    headings = re.findall(r"^[╭─ ]*(\S.*?) options[─╮ ]*$", text, re.M)  # boxed on a terminal, underlined otherwise
    assert len(headings) >= 3, headings  # -h, then one group per config (not every flag under "options")
    first = text.split("advanced options")[0]
    assert len(first.splitlines()) <= SCREEN, f"vlash {name}: {len(first.splitlines())} lines before 'advanced'"


def test_known_defaults_read_as_on_the_command_line(capsys, monkeypatch):
    serve = unboxed(help_text("serve", capsys, monkeypatch))
    assert "(default: tcp://127.0.0.1:5555)" in serve and "all CPU cores but one" in serve
    assert "(cpu, h100, h200, jetson-orin, jetson-thor, rtx-4090, rtx-5090)" in serve  # the device profiles
    evaluate = unboxed(help_text("eval", capsys, monkeypatch))
    assert "(default: 0,2,4)" in evaluate and "(default: 50)" in evaluate


def test_the_help_of_the_training_flags_agrees_with_the_shipped_recipes(capsys, monkeypatch):
    train = unboxed(help_text("train", capsys, monkeypatch))
    assert "Every shipped policy was trained with 1" in train  # --vision-aux-weight
    assert "every shipped policy trained from scratch had it on" in train  # --scratch-init


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
