"""The model-shape flags of the benchmark tools (tools/bench_contention.py, tools/bench_vs_openpi.py): --policy,
--cameras, --prompt-len, turned into one config (vlash.bench.bench_config) or a one-line argument error."""

from __future__ import annotations

import argparse

from vlash.bench import bench_config
from vlash.cli.preflight import positive_int
from vlash.errors import ConfigError
from vlash.policies.pi05.config import Pi05Config


def add_config_arguments(p: argparse.ArgumentParser, default: str = "pi05-small") -> None:
    p.add_argument("--policy", default=default, help="vlash preset (or config YAML) giving the dimensions")
    p.add_argument("--cameras", type=positive_int, default=None, help="camera count (default: the policy's)")
    p.add_argument("--prompt-len", type=positive_int, default=None, help="prompt tokens (default: the policy's)")


def config_from_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> Pi05Config:
    """The config the flags name; exits 2 through `p.error` naming --policy when it cannot be built."""
    try:
        return bench_config(args.policy, args.cameras, args.prompt_len)
    except (ConfigError, OSError) as exc:
        p.error(f"--policy {args.policy}: {exc}")
