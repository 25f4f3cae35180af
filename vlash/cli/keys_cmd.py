"""`vlash keys --out DIR --name server|client`: a CurveZMQ key pair (NAME.key public, NAME.key_secret)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from robot_io.protocol.curve import generate_keypair
from vlash.cli.command import Command
from vlash.cli.flags import ConfigFlags
from vlash.errors import ConfigError


@dataclass(frozen=True)
class KeysOptions:
    """The key pair to write."""

    out: Path  # directory to write NAME.key and NAME.key_secret to
    name: str = "client"  # key name: 'server' for the server, any name for a client
    # replace an existing key pair of this --name (--force: its name before every command that replaces an output
    # took --overwrite)
    overwrite: bool = field(default=False, metadata={"aliases": ("--force",)})


COMMAND = Command(
    "keys",
    "generate a CurveZMQ key pair for `vlash serve --curve-keys` / clients",
    "Write a CurveZMQ key pair: NAME.key (public: copy it to the other end) and NAME.key_secret (mode 0600).",
    (ConfigFlags(KeysOptions, title="key pair"),),
)


def run(args: argparse.Namespace) -> int:
    name = args.name
    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"--name must be a plain file name, got {name!r}")
    existing = [args.out / f"{name}{suffix}" for suffix in (".key", ".key_secret")]
    if not args.overwrite and any(p.exists() for p in existing):
        raise ConfigError(f"{existing[0]} exists; pass --overwrite to replace the key pair")
    public, secret = generate_keypair(args.out, name)
    print(f"public key: {public} (copy it to the other end)\nsecret key: {secret} (keep it private: mode 0600)")
    if name != "server":
        print(f"allow this client on the server: copy {public.name} into the --allow-dir directory (read at once)")
    return 0
