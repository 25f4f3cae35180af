"""`vlash eval --task reach --policy PATH|oracle --modes ... --delays ... --episodes N --json F --plot F`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from robot_io.executors import EXECUTION_MODES, ExecutorConfig
from robot_io.rerun_trace import RerunError, check_rerun
from vlash.cli.command import Command
from vlash.cli.flags import ConfigFlags
from vlash.cli.policy_args import policy_flags, policy_source
from vlash.cli.preflight import check_output_file
from vlash.cli.sim_args import load_sim_arguments, sim_flags
from vlash.errors import ConfigError
from vlash.eval.link import LinkTiming
from vlash.eval.recorded import record_episodes
from vlash.eval.report import TableConfig, plot_summary, print_table, write_summary
from vlash.eval.sweep import SEED_SPLITS, SweepConfig, run_sweep, summarize
from vlash.policies.names.source import ORACLE, PolicyKind
from vlash.progress import progress

ACCEPTED = {
    PolicyKind.ORACLE: "the scripted expert: the mechanism alone",
    PolicyKind.SHIPPED: "",
    PolicyKind.DIRECTORY: "",
}


@dataclass(frozen=True)
class EvalOptions:
    """The seeds, and what to write."""

    split: str = field(default="dev", metadata={"choices": tuple(SEED_SPLITS)})  # seed range
    json: Path | None = None  # write the summary and per-episode metrics here
    plot: Path | None = None  # write a PNG (success vs delay; reaction latency)
    # write the first --record-episodes episodes of every cell to a rerun recording, as `vlash run --record` logs a
    # robot (`rerun FILE.rrd` replays them; the [viz] extra)
    record: Path | None = field(default=None, metadata={"metavar": "FILE.rrd"})
    # episodes per cell --record writes (the cell's first seeds; run again after the sweep, deterministic)
    record_episodes: int = 1


# The sweep's settings: flags of SweepConfig, ExecutorConfig and LinkTiming (vlash.cli.flags)
SWEEP_FLAGS = ConfigFlags(
    SweepConfig,
    "task modes delays episodes seed workers",
    title="the sweep",
    notes={"modes": f"(from {','.join(EXECUTION_MODES)})", "seed": "(default: the first of --split)"},
    advanced="guidance_weight",
)
SPLIT_FLAGS = ConfigFlags(
    EvalOptions,
    "split",
    title="the sweep",
    help={
        "split": f"seed range: dev (tuning, from {SEED_SPLITS['dev']}) or report (published results, from "
        f"{SEED_SPLITS['report']})"
    },  # fmt: skip
)
EXECUTOR_FLAGS = ConfigFlags(
    ExecutorConfig,
    "execution_horizon action_stride",
    title="execution",
    notes={"execution_horizon": "(faster may go below d: its sampler stops early)"},
    advanced="state_source ensemble_every",
)
LINK_FLAGS = ConfigFlags(LinkTiming, (), advanced="prefill_share")
OUTPUT_FLAGS = ConfigFlags(EvalOptions, "json plot record record_episodes", title="outputs")
TABLE_FLAGS = ConfigFlags(
    TableConfig, "wide", title="outputs", notes={"wide": "(--json keeps every number either way)"}
)
RENAMED = {"--quantization": "--action-stride"}  # q is a stride, not weight quantization (`vlash quantize`)
COMMAND = Command(
    "eval",
    "simulated success / reaction / smoothness vs inference delay per mode",
    "Evaluate a policy (or the scripted expert) in the simulator: success, reaction and smoothness against the "
    "inference delay, per execution mode (docs/METHODS.md defines every column).",
    (
        policy_flags("the policy to evaluate", ACCEPTED, title="the sweep"),
        SWEEP_FLAGS,
        SPLIT_FLAGS,
        EXECUTOR_FLAGS,
        LINK_FLAGS,
        OUTPUT_FLAGS,
        TABLE_FLAGS,
        sim_flags("the simulator"),
    ),
    RENAMED,
)


def sweep_config(args: argparse.Namespace) -> SweepConfig:
    """The sweep the flags ask for, every flag checked (the policy loads in check_sweep, before any worker)."""
    source = policy_source(args, "eval", ACCEPTED)
    check_output_file(args.json, "--json")
    check_output_file(args.plot, "--plot")
    check_output_file(args.record, "--record")
    if args.record is not None:
        if args.record_episodes < 1:
            raise ConfigError(f"--record-episodes must be >= 1, got {args.record_episodes}")
        try:
            check_rerun()
        except RerunError as exc:
            raise ConfigError(str(exc)) from None
    if args.plot is not None:
        import matplotlib  # noqa: F401  # extra: sim (missing is said now, not after the sweep)
    sim = load_sim_arguments(args)
    executor = EXECUTOR_FLAGS.build(args, initial_delay=1)  # each episode sets its own (episode.executor_config)
    timing = LINK_FLAGS.build(args, delay=0)  # each cell sets its own
    seed = SWEEP_FLAGS.given(args).get("seed", SEED_SPLITS[args.split])
    policy = ORACLE if source.kind is PolicyKind.ORACLE else str(source.path)
    return SWEEP_FLAGS.build(args, policy=policy, executor=executor, timing=timing, seed=seed, sim=sim)


def run(args: argparse.Namespace) -> int:
    cfg = sweep_config(args)
    table = TABLE_FLAGS.build(args)
    console = Console(width=max(Console().width, 160) if table.wide else None)  # --wide: 11 columns, ~145 wide
    total = len(cfg.modes) * len(cfg.delays) * cfg.episodes
    with progress(f"vlash eval: {args.task} episodes", total, transient=True) as update:
        episodes = run_sweep(cfg, progress=lambda i, n: update(i))
    summary = summarize(cfg, episodes)
    print_table(summary, console, table)
    if args.json:
        write_summary(args.json, summary)
        console.print(f"wrote {args.json}", soft_wrap=True)  # a path is never wrapped
    if args.plot:
        console.print(f"wrote {plot_summary(summary, args.plot)}", soft_wrap=True)
    if args.record:
        cells = len(cfg.modes) * len(cfg.delays)
        with progress(f"vlash eval: recording {args.task}", cells * min(args.record_episodes, cfg.episodes),
                      transient=True) as update:  # fmt: skip
            path = record_episodes(cfg, args.record, args.record_episodes, progress=lambda i, n: update(i))
        console.print(f"wrote {path} (rerun {path})", soft_wrap=True)
    return 0
