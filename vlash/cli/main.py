"""`vlash` entry point: one sub-command per module, imported only when that command runs.

`vlash run` executes on robot computers without torch, so the top level must not import the model-side
commands. The table below gives each command's module and help line; `vlash --help` is built from it alone.
Parsing happens in two passes: the top-level parser picks the command (its arguments are left unparsed),
then the command's module is imported and its `COMMAND` (vlash.cli.command: tyro over config dataclasses) parses
them.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from types import ModuleType
from typing import NoReturn

import vlash
from vlash.cli.command import Command
from vlash.errors import VlashError
from vlash.thread_waits import passive_thread_waits

# Top-level modules of the extras, and the extra that brings each: a command that needs a missing one says so.
EXTRA_OF_MODULE: dict[str, str] = {
    **dict.fromkeys(("torch", "safetensors", "tokenizers", "rich", "websockets"), "server"),
    **dict.fromkeys(("gymnasium", "cv2", "matplotlib"), "sim"),
    **dict.fromkeys(("onnx", "onnxruntime"), "onnx"),
}

# name -> (module, help): the help must equal the one the module's COMMAND gives (tests/cli checks it).
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("vlash.cli.info_cmd", "show a policy's configuration and parameter counts"),
    "bench": ("vlash.cli.bench_cmd", "time prefill, denoise step, time to first action and full chunk"),
    "export": ("vlash.cli.export_cmd", "export a policy to an engine artifact (ONNX Runtime graphs, TensorRT engines)"),
    "eval": ("vlash.cli.eval_cmd", "simulated success / reaction / smoothness vs inference delay per mode"),
    "train": ("vlash.cli.train_cmd", "train a policy from scratch on simulated expert demonstrations"),
    "serve": ("vlash.cli.serve_cmd", "serve a policy to robot clients over ZeroMQ"),
    "convert": (
        "vlash.cli.convert_cmd",
        "convert a LeRobot or openpi (PyTorch or JAX) checkpoint into a vlash policy directory",
    ),
    "keys": ("vlash.cli.keys_cmd", "generate a CurveZMQ key pair for `vlash serve --curve-keys` / clients"),
    "run": ("vlash.cli.run_cmd", "run a robot (or the simulator) under a remote policy server"),
    "quantize": (
        "vlash.cli.quantize_cmd",
        "quantize a policy (torch int8/int4/fp8, ONNX int8, TensorRT), gate vs fp32",
    ),
    "demo": ("vlash.cli.demo_cmd", "serve the shipped policy and drive the simulated arm through it, with a plot"),
}


SIGPIPE_STATUS = 141  # 128 + SIGPIPE: how a shell reports a command whose reader went away (`yes | head`)
SERVER_COMMANDS = ("serve",)  # commands whose process serves a robot beside other work: idle CPU threads sleep


class CommandParser(argparse.ArgumentParser):
    """The top-level parser: a bad argument is one line, `vlash: error: ...`, like every other setup error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: global flags and the command name (a command's own flags are not parsed here)."""
    parser = CommandParser(prog="vlash", description="Real-time inference for VLA robot policies.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"vlash {vlash.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)  # --help goes to the command's own
    return parser


def command_module(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS[name][0])


def command_of(name: str) -> Command:
    """The command's command line (imports its module)."""
    return command_module(name).COMMAND


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    top, rest = build_parser().parse_known_args(argv)
    if top.command in SERVER_COMMANDS:
        passive_thread_waits()  # before the command's module imports torch
    args = command_of(top.command).parse(rest)
    args.command, args.verbose = top.command, top.verbose
    return args


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The `pip install` line for a missing optional dependency, or None if `exc` is not one."""
    root = (exc.name or "").partition(".")[0]
    extra = EXTRA_OF_MODULE.get(root)
    return None if extra is None else f"pip install 'vlash[{extra}]'"


def main(argv: list[str] | None = None) -> int:
    try:
        code = run_command(argv)
        sys.stdout.flush()  # a reader that closed the pipe (`vlash info --json | head`) shows here, not at exit
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush goes nowhere
        return SIGPIPE_STATUS
    return code


def run_command(argv: list[str] | None) -> int:
    """Parse `argv` and run its command; setup errors are one line on stderr (rc 2)."""
    try:
        args = parse_args(argv)
    except ModuleNotFoundError as exc:  # a command module needs an extra this install lacks
        if (fix := missing_extra(exc)) is None:
            raise
        command = next((a for a in (argv if argv is not None else sys.argv[1:]) if a in COMMANDS), "vlash")
        print(
            f"vlash {command}: error: this command needs {exc.name!r}, which is not installed: {fix}", file=sys.stderr
        )
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return command_module(args.command).run(args)
    except VlashError as exc:  # setup errors: one clear line, no traceback
        print(f"vlash {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an extra imported when the command runs
        if (fix := missing_extra(exc)) is None:
            raise
        print(f"vlash {args.command}: error: needs {exc.name!r}, which is not installed: {fix}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
