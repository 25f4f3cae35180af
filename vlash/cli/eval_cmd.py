"""`vlash eval --task reach --policy PATH|oracle --modes ... --delays ... --episodes N --json F --plot F`."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from robot_io.executors import EXECUTION_MODES, ExecutorConfig
from robot_io.rerun_trace import RerunError, check_rerun
from vlash.cli.config_flags import ConfigFlags, add_renamed_flags
from vlash.cli.policy_args import add_policy_arguments, policy_source
from vlash.cli.preflight import check_output_file
from vlash.cli.sim_args import add_sim_arguments, load_sim_arguments
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


# The sweep's settings: flags generated from SweepConfig, ExecutorConfig and LinkTiming (vlash.cli.config_flags)
SWEEP_FLAGS = ConfigFlags(
    SweepConfig,
    "task modes delays episodes seed workers",
    notes={"modes": f"(from {','.join(EXECUTION_MODES)})", "seed": "(default: the first of --split)"},
)
EXECUTOR_FLAGS = ConfigFlags(
    ExecutorConfig,
    "execution_horizon action_stride state_source ensemble_every",
    notes={"execution_horizon": "(faster may go below d: its sampler stops early)"},
)
LINK_FLAGS = ConfigFlags(LinkTiming, "prefill_share")
TABLE_FLAGS = ConfigFlags(TableConfig, "wide", notes={"wide": "(--json keeps every number either way)"})
RENAMED = {"--quantization": "--action-stride"}  # q is a stride, not weight quantization (`vlash quantize`)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="simulated success / reaction / smoothness vs inference delay per mode")
    add_sim_arguments(p, "to evaluate in")
    add_policy_arguments(p, "the policy to evaluate", ACCEPTED)
    SWEEP_FLAGS.add_to(p)
    EXECUTOR_FLAGS.add_to(p)
    LINK_FLAGS.add_to(p)
    TABLE_FLAGS.add_to(p)
    add_renamed_flags(p, RENAMED)
    p.add_argument(
        "--split",
        default="dev",
        choices=tuple(SEED_SPLITS),
        help=f"seed range: dev (tuning, from {SEED_SPLITS['dev']}) or report (published results, from "
        f"{SEED_SPLITS['report']})",
    )
    p.add_argument("--json", type=Path, default=None, help="write the summary and per-episode metrics here")
    p.add_argument("--plot", type=Path, default=None, help="write a PNG (success vs delay; reaction latency)")
    p.add_argument("--record", type=Path, default=None, metavar="FILE.rrd", help="write the first "
                   "--record-episodes episodes of every cell to a rerun recording, as `vlash run --record` logs a "
                   "robot (`rerun FILE.rrd` replays them; the [viz] extra)")  # fmt: skip
    p.add_argument("--record-episodes", type=int, default=1, metavar="N", help="episodes per cell --record "
                   "writes (the cell's first seeds; run again after the sweep, deterministic)")  # fmt: skip


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
