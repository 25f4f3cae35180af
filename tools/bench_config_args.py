"""The model-shape flags of the benchmark tools (tools/bench_contention.py, tools/bench_vs_openpi.py): --policy,
--cameras, --prompt-len, turned into one config (`bench_config`) or a one-line argument error."""

from __future__ import annotations

import argparse

from vlash.cli.preflight import positive_int
from vlash.errors import ConfigError
from vlash.policies.pi05.config import Pi05Config, load_preset


def bench_config(policy: str, cameras: int | None = None, prompt_len: int | None = None) -> Pi05Config:
    """A preset (or config YAML) with `cameras` camera slots and a `prompt_len`-token prompt where given: the
    benchmark tools' configs, e.g. issue 23's 164M one (pi05-small, 1 camera, prompt 64)."""
    config = load_preset(policy)
    config = config if cameras is None else config.with_cameras(cameras)
    return config if prompt_len is None else config.with_overrides(max_token_len=prompt_len)


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
