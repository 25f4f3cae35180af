"""`vlash train --out DIR`: record expert episodes in vlash.sim and train a pi0.5-shaped policy on them."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from vlash.cli.policy_args import add_policy_arguments, policy_source
from vlash.cli.preflight import add_overwrite_argument, check_output_dir, check_output_file, positive_int
from vlash.cli.sim_args import add_sim_arguments, load_sim_arguments
from vlash.errors import ConfigError
from vlash.output_kinds import OutputKind
from vlash.policies.names.source import PolicyKind
from vlash.policies.pi05 import available_presets
from vlash.train.config import ACTION_NORMS, DEFAULT_TASKS, TrainConfig, TrainResult

ACCEPTED = {
    PolicyKind.PRESET: "the architecture, trained from scratch",
    PolicyKind.SHIPPED: "fine-tuned: the same as --init-from",
    PolicyKind.DIRECTORY: "vlash layout, fine-tuned: the same as --init-from",
}

# Training-only heads and probes (vlash.train.vision_aux / vision_use): TrainConfig field, type, help. Each is the
# flag --field-with-dashes, defaulting to TrainConfig's value.
AUX_FLAGS = (
    ("vision_aux_weight", float, "weight of the per-patch item-label loss on the vision tower; 0: off"),
    ("patch_offset_weight", float, "weight of the per-patch regression of where in the patch each item is; 0: off"),
    ("target_aux_weight", float, "weight of the task-target (x, y) regression from the VLM; 0: off"),
    ("expert_target_aux_weight", float, "weight of the same regression from the action expert's residual; 0: off"),
    ("named_patch_weight", float, "weight of the VLM image tokens' classification of the named target's patch; 0: off"),
    ("target_aux_layer", int, "VLM layer whose input the target head reads (default: the last)"),
    ("expert_target_aux_layer", int, "expert layer whose input its target head reads (default: the final norm's)"),
    ("grounding_steps", int, "first N of --steps train the aux heads only (vision + VLM, no expert); all: a VLM base"),
    ("vision_probe_every", int, "measure image_gain (loss with shuffled images - loss) every N steps; 0: off"),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a policy from scratch on simulated expert demonstrations")
    p.add_argument("--out", required=True, help="policy directory to write (new or empty; atomically, at the end)")
    add_overwrite_argument(p, OutputKind.TRAINING_RUN)
    add_policy_arguments(p, f"what to train ({', '.join(available_presets())})", ACCEPTED, default="pi05-tiny")
    p.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="comma-separated vlash.sim tasks")
    add_sim_arguments(p, "to record in")
    p.add_argument("--episodes", type=int, default=200, help="expert episodes recorded per task")
    p.add_argument("--steps", type=int, default=TrainConfig.steps, help="optimizer steps")
    p.add_argument("--batch", type=int, default=32, help="samples per step")
    p.add_argument("--lr", type=float, default=TrainConfig.lr, help="AdamW peak learning rate")
    p.add_argument(
        "--ema", type=float, default=TrainConfig.ema_decay, help="save an EMA of the weights with this decay (0: off)"
    )
    p.add_argument("--warmup", type=int, default=TrainConfig.warmup_steps, help="linear warm-up steps")
    p.add_argument("--d-max", type=int, default=8, help="largest future-state offset / committed prefix")
    p.add_argument("--no-augment", action="store_true", help="baseline: no future state, no prefix, constant times")
    p.add_argument(
        "--mix-prob",
        type=float,
        default=TrainConfig.mix_prob,
        help="share of hand-off samples (committed prefix, horizon-aware times) when augmenting",
    )
    p.add_argument(
        "--moving-share",
        type=float,
        default=TrainConfig.moving_share,
        help="share of samples drawn from frames whose chunk label moves (0: uniform frames)",
    )
    p.add_argument(
        "--absolute",
        action="store_true",
        help="predict absolute joint targets (default: relative to the state; velocity actions never are)",
    )
    p.add_argument(
        "--action-norm",
        choices=ACTION_NORMS,
        default=None,
        help="action normalization (default: MEAN_STD for velocity actions, else QUANTILES)",
    )
    p.add_argument(
        "--task-space",
        action="store_true",
        help="plan end-effector positions (velocity actions: end-effector velocities); inverse kinematics turns "
        "the chunk into joint positions (velocities) (default: plan joint values)",
    )
    p.add_argument(
        "--no-tail",
        action="store_true",
        help="mask chunk labels past each episode's end instead of using the expert's plan",
    )
    p.add_argument(
        "--plan-labels",
        action="store_true",
        help="label each frame with the expert's plan at that frame, not the actions it commanded later "
        "(tasks whose targets appear mid-chunk: whack)",
    )
    p.add_argument("--scratch-init", action="store_true", help="unit-scale embeddings + 2-D image position codes")
    p.add_argument(
        "--init-from",
        default=None,
        metavar="DIR",
        help="start from this policy directory's weights and tokenizer (e.g. a grounding-only VLM base)",
    )
    p.add_argument("--dataset", default=None, help=".npz of episodes: reused when it exists, else recorded there")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--image-size", type=int, default=None, help="simulator render size in pixels (default: the settings', 96)"
    )
    p.add_argument("--threads", type=positive_int, default=2, help="torch CPU threads")
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the training forward (~1.6x faster steps after a 1-2 min compile; needs a C++ compiler)",
    )
    p.add_argument("--log-every", type=int, default=25, help="steps per progress update")
    p.add_argument("--checkpoint-every", type=int, default=0, help="also write the policy every N steps (0: off)")
    p.add_argument(
        "--stop-after",
        type=positive_int,
        default=None,
        metavar="N",
        help="end after N of the --steps schedule's steps and write the policy there (default: all --steps)",
    )
    for field, kind, text in AUX_FLAGS:
        p.add_argument(f"--{field.replace('_', '-')}", type=kind, default=getattr(TrainConfig, field), help=text)
    p.add_argument("--keep-failed", action="store_true", help="train on failed expert episodes too")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


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

    unknown = [t.strip() for t in args.tasks.split(",") if t.strip() and t.strip() not in TASKS]
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


def sim_settings(args: argparse.Namespace) -> tuple[dict, int]:
    """(TrainConfig.sim, image_size) of --sim-config / --sim / --image-size: {} when neither settings flag is
    given (the simulator's defaults), else the whole settings, with --image-size in place of theirs."""
    if args.sim_config is None and not args.sim:
        return {}, TrainConfig.image_size if args.image_size is None else args.image_size
    settings = load_sim_arguments(args).to_dict()
    if args.image_size is not None:
        settings["image_size"] = args.image_size
    return settings, settings["image_size"]


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    policy, init_from = architecture(args)
    sim, image_size = sim_settings(args)
    return TrainConfig(
        policy=policy,
        tasks=tuple(t.strip() for t in args.tasks.split(",") if t.strip()),
        episodes_per_task=args.episodes,
        steps=args.steps,
        batch_size=args.batch,
        lr=args.lr,
        warmup_steps=args.warmup,
        ema_decay=args.ema,
        seed=args.seed,
        d_max=args.d_max,
        augment=not args.no_augment,
        mix_prob=args.mix_prob,
        moving_share=args.moving_share,
        relative_actions=False if args.absolute else None,  # None: relative for position actions only
        task_space=args.task_space,
        action_norm=args.action_norm,
        label_tail=not args.no_tail,
        plan_labels=args.plan_labels,
        scratch_init=args.scratch_init,
        init_from=init_from,
        image_size=image_size,
        sim=sim,
        only_successful=not args.keep_failed,
        num_threads=args.threads,
        compile=args.compile,
        out=args.out,
        dataset=args.dataset,
        log_every=args.log_every,
        checkpoint_every=args.checkpoint_every,
        stop_after=args.stop_after,
        **{field: getattr(args, field) for field, _, _ in AUX_FLAGS},
        progress=not args.quiet,
    )


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
    except KeyboardInterrupt:
        kept = f" (checkpoints every {config.checkpoint_every} steps are kept)" if config.checkpoint_every else ""
        console.print(f"[bold red]interrupted[/]: {config.out} was not replaced{kept}")
        return 130
    if args.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print_summary(result, console)
    return 0
