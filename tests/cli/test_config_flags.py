"""Flags of a config dataclass, parsed by tyro (vlash.cli.flags, vlash.cli.command): the field's name, type, default
and comment make the flag; the config alone checks the value, and its error names the flag; a bad argument is one
line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pytest

from vlash.cli.command import Command
from vlash.cli.flags import ConfigFlags, field_type, flag_message, given_dests
from vlash.dataclass_io import field_comments
from vlash.errors import ConfigError

if TYPE_CHECKING:  # a name only type checkers see: the annotation naming it is not resolved for another field
    from vlash.sim.settings import SimSettings


@dataclass
class Example:
    """A config as the house style writes one."""

    # --- a section header, not a field's comment
    rate_hz: float = 30.0  # control rate
    # the largest batch; 1: one at a time
    max_batch: int = 8
    mode: Literal["fast", "slow"] = "fast"  # how to run
    delays: tuple[int, ...] = (0, 2, 4)  # inference delays d  # fmt: skip
    out: Path | None = None  # where to write
    augment: bool = True  # future-state offsets
    compile: bool = False  # torch.compile the forward
    relative: bool | None = None  # relative actions; None: decided by the actions
    name: str = field(default="a", metadata={"choices": ("a", "b")})  # fmt: skip
    camera: tuple[str, ...] = field(default=(), metadata={"repeatable": True, "metavar": "A=B"})  # a camera map
    graphs: str | None = field(default=None, metadata={"choices": ("chunk", "step"), "optional_value": "chunk"})
    no_comment: int = 1
    settings: SimSettings | None = None  # not a flag: its type is only imported for type checkers

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise ConfigError(f"max_batch must be >= 1, got {self.max_batch}")
        if self.rate_hz <= 0:
            raise ValueError(f"Example.rate_hz must be > 0 (max_batch {self.max_batch}), got {self.rate_hz}")


FLAGS = ConfigFlags(Example, "rate_hz max_batch mode delays out augment compile relative name camera graphs no_comment")
COMMAND = Command("example", "an example", "An example command.", (FLAGS,), {"--fps": "--rate-hz"})


def parse(*argv: str) -> argparse.Namespace:
    return COMMAND.parse(list(argv))


def test_the_comments_of_the_fields_are_read_from_the_source():
    comments = field_comments(Example)
    assert comments["rate_hz"] == "control rate" and comments["max_batch"] == "the largest batch; 1: one at a time"
    assert "name" not in comments and "no_comment" not in comments  # a lint pragma alone is no comment
    assert comments["delays"] == "inference delays d"  # nor is one after the comment
    assert "section header" not in " ".join(comments.values())


def test_a_field_type_is_resolved_alone():
    assert field_type(Example, "delays") == tuple[int, ...] and field_type(Example, "out") == Path | None


def test_a_flag_is_named_typed_and_defaulted_by_its_field():
    args = parse()
    assert (args.rate_hz, args.max_batch, args.mode, args.delays, args.out) == (30.0, 8, "fast", (0, 2, 4), None)
    assert (args.augment, args.compile, args.relative, args.camera, args.graphs) == (True, False, None, (), None)
    args = parse("--rate-hz", "50", "--delays", "1,3", "--out", "x.json", "--no-augment", "--compile", "--relative",
                 "--camera", "a=b", "--camera=c=d", "--graphs")  # fmt: skip
    assert (args.rate_hz, args.delays, args.out, args.augment, args.compile, args.relative) == (
        50.0, (1, 3), Path("x.json"), False, True, True)  # fmt: skip
    assert args.camera == ("a=b", "c=d") and args.graphs == "chunk"  # the bare flag's value
    assert parse("--no-relative").relative is False and parse("--graphs", "step").graphs == "step"


def test_given_lists_only_the_flags_on_the_command_line():
    args = parse("--max-batch", "8", "--no-augment")
    assert given_dests(args) == {"max_batch", "augment"}  # 8 is the default, and still given
    assert FLAGS.given(args) == {"max_batch": 8, "augment": False}
    assert FLAGS.build(args) == Example(max_batch=8, augment=False)
    assert FLAGS.build(parse(), rate_hz=10.0).rate_hz == 10.0  # what the command sets itself


def one_line_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and err.startswith("vlash example: error: "), err
    assert err.rstrip().endswith("(`vlash example --help` lists the options)"), err
    return err


def test_the_flag_checks_the_type_and_the_choices_and_the_config_the_value(capsys):
    args = parse("--max-batch", "0")  # not refused by the parser
    with pytest.raises(ConfigError, match=r"^--max-batch must be >= 1, got 0$"):
        FLAGS.build(args)
    with pytest.raises(ConfigError, match=r"^--rate-hz must be > 0 \(--max-batch 8\), got -1.0$"):
        FLAGS.build(parse("--rate-hz", "-1"))  # robot_io's ValueError, its Class.field and a field in the text
    assert "argument --max-batch: invalid int value: 'many'" in one_line_error(["--max-batch", "many"], capsys)
    assert "argument --mode: invalid choice: 'warp' (choose from 'fast', 'slow')" in one_line_error(
        ["--mode", "warp"], capsys
    )
    assert "unrecognized arguments: --bogus 1" in one_line_error(["--bogus", "1"], capsys)
    assert "expected comma-separated int values, got 'a,b'" in one_line_error(["--delays", "a,b"], capsys)


def test_help_is_the_comment_with_the_default_and_the_choices(capsys):
    with pytest.raises(SystemExit):
        parse("--help")
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "--rate-hz HZ control rate (default: 30.0)" in text
    assert "--max-batch N the largest batch; 1: one at a time (default: 8)" in text
    assert "--mode {fast,slow} how to run (default: fast)" in text and "--name {a,b}" in text
    assert "--no-augment turn off: future-state offsets (default: on)" in text
    assert "--delays A,B,... inference delays d (default: 0,2,4)" in text
    assert "--camera A=B a camera map (repeatable)" in text  # not "(default: )"
    assert "(default: None)" not in text and "(default: False)" not in text and "(default: )" not in text


def test_an_old_spelling_is_refused_naming_the_new_one(capsys):
    assert "error: --fps is now --rate-hz" in one_line_error(["--fps", "30"], capsys)
    with pytest.raises(SystemExit):
        parse("--help")
    assert "--fps" not in capsys.readouterr().out  # not an option any more


def test_flags_that_exclude_each_other(capsys):
    command = Command("example", "", "", (FLAGS,), exclusive=(("out", "name"),), required_one_of=(("out", "name"),))
    with pytest.raises(SystemExit):
        command.parse(["--out", "x", "--name", "b"])
    assert "argument --name: not allowed with argument --out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        command.parse([])
    assert "one of the arguments --out --name is required" in capsys.readouterr().err
    assert command.parse(["--name", "b"]).name == "b"


def test_messages_name_flags_only_where_they_name_fields():
    flags = {"mode": "--mode", "max_step": "--max-step", "prompt": "--prompt"}
    assert flag_message("Example: mode must be one of x", Example, flags) == "--mode must be one of x"
    assert flag_message("the vlash mode needs max_step", Example, flags) == "the vlash mode needs --max-step"
    assert flag_message("see --max-step and a/max_step", Example, flags) == "see --max-step and a/max_step"


def test_a_field_no_flag_can_give_is_a_programming_error():
    @dataclass
    class Odd:
        mapping: dict[str, int] = field(default_factory=dict)  # not a flag

    with pytest.raises(TypeError, match="mapping: no command-line flag reads"):
        ConfigFlags(Odd, "mapping", title="odd").section("odd")
    with pytest.raises(TypeError, match="no fields"):
        ConfigFlags(Odd, "nope")
