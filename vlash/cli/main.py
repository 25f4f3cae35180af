"""`vlash` entry point: one sub-command per module (info, bench, ...)."""

from __future__ import annotations

import argparse
import logging
import sys

from vlash.cli import bench_cmd, eval_cmd, info_cmd, keys_cmd, run_cmd, serve_cmd, train_cmd
from vlash.errors import VlashError

COMMANDS = {
    "info": info_cmd,
    "bench": bench_cmd,
    "eval": eval_cmd,
    "train": train_cmd,
    "serve": serve_cmd,
    "keys": keys_cmd,
    "run": run_cmd,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vlash", description="Real-time inference for VLA robot policies.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return COMMANDS[args.command].run(args)
    except VlashError as exc:  # setup errors: one clear line, no traceback
        print(f"vlash {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
