"""`vlash convert --from KIND SRC --out DIR`: a LeRobot or openpi checkpoint as a vlash policy directory.

    vlash convert --from openpi-jax ~/.cache/openpi/openpi-assets/checkpoints/pi05_droid --out pi05-droid \
        --tokenizer paligemma_tokenizer.model --action-horizon 15
    vlash convert --from lerobot my_pi05_finetune --out pi05-mine --tokenizer paligemma/tokenizer.json

The result loads without any of the source's options (`vlash serve --checkpoint DIR`, `vlash export`), acts as
the source does on the same inputs and noise, and is written atomically (a failed run leaves nothing behind).
openpi JAX params need the openpi extra (orbax): pip install 'vlash[openpi]'.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from vlash.cli.checkpoint_args import CHECKPOINT_FLAGS, check_checkpoint_files, checkpoint_options
from vlash.cli.command import Command
from vlash.cli.flags import ConfigFlags
from vlash.cli.preflight import check_output_dir, overwrite_flags, positive_int
from vlash.errors import ConfigError
from vlash.output_kinds import OutputKind
from vlash.policies.formats.layouts import checkpoint_dirs, detect_layout
from vlash.progress import clock_text

HELP = "convert a LeRobot or openpi (PyTorch or JAX) checkpoint into a vlash policy directory"
SOURCES = ("lerobot", "openpi", "openpi-jax")


@dataclass(frozen=True)
class ConvertOptions:
    """The checkpoint to convert, and where to."""

    source_kind: str = field(metadata={"flag": "--from", "choices": SOURCES})  # the source's layout
    # checkpoint directory (openpi-jax: the root holding params/ and assets/)
    source: Path = field(metadata={"positional": True, "metavar": "SOURCE"})
    out: Path  # vlash policy directory to write (new or empty; atomically)
    # openpi-jax: the chunk length the checkpoint was trained with (pi05_droid 15, pi05_libero 10; default 50)
    action_horizon: int | None = field(default=None, metadata={"parse": positive_int})


COMMAND = Command(
    "convert",
    HELP,
    "Convert a LeRobot or openpi checkpoint into a vlash policy directory, which loads without any of these options.",
    (
        ConfigFlags(ConvertOptions, title="conversion"),
        overwrite_flags(OutputKind.POLICY, title="conversion"),
        CHECKPOINT_FLAGS,
    ),
)


def _stages(start: float):
    """Stage lines on stderr, with the time since `start` (plain lines: they read the same in a log)."""

    def say(message: str) -> None:
        print(f"vlash convert: {message} ({clock_text(time.perf_counter() - start)})", file=sys.stderr, flush=True)

    return say


def check_paths(args: argparse.Namespace) -> None:
    """The source is a checkpoint of --from's layout with a tokenizer (its own or --tokenizer), and the output can
    be written without touching it: before torch is imported."""
    if not args.source.is_dir():
        raise ConfigError(f"source {str(args.source)!r}: no such directory")
    source, out = args.source.resolve(), args.out.resolve()
    if out == source or source in out.parents:
        raise ConfigError(f"--out {str(args.out)!r} is (inside) the source {str(args.source)!r}; write elsewhere")
    check_output_dir(args.out, "--out", OutputKind.POLICY, args.overwrite)
    if args.action_horizon is not None and args.source_kind != "openpi-jax":
        raise ConfigError("--action-horizon applies to --from openpi-jax (other layouts store their chunk length)")
    if args.source_kind == "openpi-jax":
        root = checkpoint_dirs(args.source)[0]
        check_checkpoint_files(args, root, "openpi")  # its tokenizer, like a PyTorch one's, is beside assets/
        return
    layout = detect_layout(args.source)
    if layout != args.source_kind:
        raise ConfigError(f"{args.source} looks like a {layout} directory, not {args.source_kind}")
    check_checkpoint_files(args, args.source, layout)


def run(args: argparse.Namespace) -> int:
    check_paths(args)
    options = checkpoint_options(args)
    start = time.perf_counter()
    say = _stages(start)
    if args.source_kind == "openpi-jax":
        from vlash.policies.formats.openpi_jax import convert_openpi_jax  # extra: server

        policy = convert_openpi_jax(args.source, args.out, options, args.action_horizon, progress=say)
    else:
        from vlash.policies.formats.loading import load_policy  # extra: server
        from vlash.policies.formats.vlash_dir import save_loaded_policy  # extra: server

        say(f"loading {args.source}")
        policy = load_policy(args.source, options=options)
        say(f"writing {args.out}")
        save_loaded_policy(args.out, policy)
    params = sum(p.numel() for p in policy.model.parameters())
    print(
        f"vlash convert: {args.source} ({args.source_kind}) -> {args.out}: {policy.config.name}, {params / 1e6:.1f}M "
        f"params, {policy.processor.action_dims} action dims, {time.perf_counter() - start:.1f} s"
    )
    return 0
