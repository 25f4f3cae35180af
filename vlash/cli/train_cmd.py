"""`vlash train --out DIR`: record expert episodes in vlash.sim and train a pi0.5-shaped policy on them."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from vlash.atomic import check_replaceable
from vlash.cli.command import Command
from vlash.cli.flags import ConfigFlags
from vlash.cli.policy_args import accepted_help, policy_source
from vlash.cli.preflight import check_output_dir, check_output_file, overwrite_flags
from vlash.cli.sim_args import load_sim_arguments, sim_flags
from vlash.errors import ConfigError
from vlash.output_kinds import OutputKind
from vlash.policies.names.source import PolicyKind
from vlash.policies.pi05 import available_presets
from vlash.train.config import TrainConfig, TrainResult
from vlash.train.interrupt import TrainingInterrupted, interrupted_path

ACCEPTED = {
    PolicyKind.PRESET: "the architecture, trained from scratch",
    PolicyKind.SHIPPED: "fine-tuned: the same as --init-from",
    PolicyKind.DIRECTORY: "vlash layout, fine-tuned: the same as --init-from",
}


@dataclass(frozen=True)
class TrainOptions:
    """Where the policy goes."""

    # policy directory to write (new or empty; atomically, at the end); Ctrl-C keeps the steps done in OUT.interrupted
    out: str = field(metadata={"metavar": "OUT"})
    json: bool = False  # print the summary as JSON


# What to train and how: flags of TrainConfig's fields (vlash.cli.flags); what the shipped recipes set first
TRAIN_FLAGS = ConfigFlags(
    TrainConfig,
    "policy tasks episodes_per_task dataset init_from seed",
    title="what to train",
    more={"optimization and augmentation": "steps batch_size lr augment mix_prob task_space compile num_threads"},
    help={"policy": f"what to train ({', '.join(available_presets())}): {accepted_help(ACCEPTED)}"},
    notes={"image_size": "(default: --sim-config's, else {default})"},
    advanced="ema_decay warmup_steps d_max moving_share relative_actions action_norm label_tail plan_labels "
    "prefix_from demo_execute_steps demo_delay_max only_successful scratch_init vision_aux_weight patch_offset_weight "
    "target_aux_weight expert_target_aux_weight named_patch_weight target_aux_layer expert_target_aux_layer "
    "grounding_steps image_size log_every checkpoint_every stop_after vision_probe_every progress",
)
RENAMED = {
    "--episodes": "--episodes-per-task",
    "--batch": "--batch-size",
    "--ema": "--ema-decay",
    "--warmup": "--warmup-steps",
    "--threads": "--num-threads",
    "--no-tail": "--no-label-tail",
    "--absolute": "--no-relative-actions",
    "--keep-failed": "--no-only-successful",
    "--quiet": "--no-progress",
}
COMMAND = Command(
    "train",
    "train a policy from scratch on simulated expert demonstrations",
    "Record expert episodes in the simulator and train a pi0.5-shaped policy on them (docs/EVALUATION.md has the "
    "shipped policies' recipes).",
    (
        ConfigFlags(TrainOptions, title="what to train"),
        overwrite_flags(OutputKind.TRAINING_RUN, title="what to train"),
        TRAIN_FLAGS,
        sim_flags("the simulator to record in", advanced=True),
    ),
    RENAMED,
)


def architecture(args: argparse.Namespace) -> tuple[str, str | None]:
    """(TrainConfig.policy, init_from): --policy a preset, or a policy directory to start from (its preset)."""
    source = policy_source(args, "train", ACCEPTED)
    if source.kind is PolicyKind.PRESET:
        return args.policy, args.init_from
    if source.layout != "vlash":
        raise ConfigError(f"{source.value} is {source.describe()}: `vlash convert` it to a vlash directory first")
    if args.init_from is not None:
        raise ConfigError(f"--policy {source.value} already names the policy to start from; drop --init-from")
    preset = source.config().name
    if preset not in available_presets():
        raise ConfigError(
            f"{source.value} was made from {preset!r}, not a preset: give --policy PRESET --init-from DIR"
        )
    return preset, str(source.path)


def check_args(args: argparse.Namespace, config: TrainConfig) -> None:
    """What TrainConfig cannot see: the tasks exist and take the simulator settings (task.* keys), the files named
    are there (before anything is recorded)."""
    from vlash.sim.env import TASKS, make_env  # extra: sim; the sim extra: train records in the simulator anyway
    from vlash.sim.errors import SimConfigError  # extra: sim

    unknown = [task for task in config.tasks if task not in TASKS]
    if unknown:
        raise ConfigError(f"--tasks: unknown task {', '.join(map(repr, unknown))}; choose from {', '.join(TASKS)}")
    for task in config.tasks:
        try:
            make_env(task, seed=0, settings=config.sim_settings())
        except SimConfigError as exc:
            raise ConfigError(f"--sim-config / --sim: {exc}") from None
    if args.init_from is not None and not Path(args.init_from).is_dir():
        raise ConfigError(f"--init-from {args.init_from!r}: no such directory")
    if args.dataset is not None:
        check_output_file(Path(args.dataset), "--dataset")
    check_output_dir(Path(args.out), "--out", OutputKind.TRAINING_RUN, args.overwrite)
    check_replaceable(interrupted_path(args.out), "--out")  # where Ctrl-C keeps the steps done: vlash's, or none


def sim_settings(args: argparse.Namespace) -> tuple[dict, int]:
    """(TrainConfig.sim, image_size) of --sim-config / --sim / --image-size: {} when neither settings flag is
    given (the simulator's defaults), else the whole settings, with --image-size in place of theirs."""
    image_size = TRAIN_FLAGS.given(args).get("image_size")
    if args.sim_config is None and not args.sim:
        return {}, TRAIN_FLAGS.value(args, "image_size")
    settings = load_sim_arguments(args).to_dict()
    if image_size is not None:
        settings["image_size"] = image_size
    return settings, settings["image_size"]


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    policy, init_from = architecture(args)
    sim, image_size = sim_settings(args)
    return TRAIN_FLAGS.build(args, policy=policy, init_from=init_from, image_size=image_size, sim=sim, out=args.out)


def print_summary(result: TrainResult, console: Console) -> None:
    table = Table("", "value", title=f"trained {result.out}")
    summary = result.summary()
    for key, value in summary.items():
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    console.print(table)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    check_args(args, config)
    from vlash.train.trainer import train  # extra: sim, server; torch-heavy: only once the arguments are checked

    console = Console(stderr=args.json)
    try:
        result = train(config, command=shlex.join(["vlash", *sys.argv[1:]]))  # not argv[0]: an install path
    except TrainingInterrupted as stop:  # in the steps: what they reached is in OUT.interrupted
        print(f"vlash train: {stop.line()}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # before the steps (recording episodes, building the model)
        print(
            f"vlash train: interrupted before the first training step: {config.out} was not replaced", file=sys.stderr
        )
        return 130
    if args.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print_summary(result, console)
    return 0
