"""`vlash serve`: serve a policy over ZeroMQ to robot clients (see vlash.server), or as a Ray Serve fleet.

The arguments are checked first, torch-free (vlash.cli.serve_args); vlash.cli.serve_run then loads the policy and
serves it.
"""

from __future__ import annotations

import argparse

from vlash.cli.serve_args import COMMAND, check_args

__all__ = ["COMMAND", "check_args", "run"]


def run(args: argparse.Namespace) -> int:
    checked = check_args(args)
    from vlash.cli import serve_run  # extra: server (torch and the model code, once the arguments are checked)

    return serve_run.run_fleet(args, checked) if args.ray else serve_run.serve(args, checked)
