"""`vlash eval --task reach --policy PATH|oracle --modes ... --delays ... --episodes N --json F --plot F`."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rich.console import Console

from vlash.atomic import atomic_write
from vlash.cli.policy_args import add_policy_arguments, policy_source
from vlash.cli.preflight import check_output_file, positive_int
from vlash.errors import ConfigError
from vlash.eval.modes import MODES, ExecutionConfig
from vlash.eval.report import plot_summary, print_table
from vlash.eval.sweep import SweepConfig, run_sweep, summarize
from vlash.policies.policy_source import ORACLE, PolicyKind
from vlash.progress import progress

ACCEPTED = {
    PolicyKind.ORACLE: "the scripted expert: the mechanism alone",
    PolicyKind.SHIPPED: "",
    PolicyKind.DIRECTORY: "",
}


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="simulated success / reaction / smoothness vs inference delay per mode")
    p.add_argument("--task", required=True, help="reach, track, whack or intercept")
    add_policy_arguments(p, "the policy to evaluate", ACCEPTED)
    p.add_argument("--modes", default="sync,naive,vlash,faster", help=f"comma-separated, from {','.join(MODES)}")
    p.add_argument("--delays", type=_ints, default=(0, 2, 4), help="inference delays in control steps, e.g. 0,2,4")
    p.add_argument("--episodes", type=positive_int, default=50, help="episodes per (mode, delay)")
    p.add_argument(
        "--execution-horizon",
        type=int,
        default=10,
        help="s: actions run per chunk (faster may go below d: its sampler stops early)",
    )
    p.add_argument("--quantization", type=int, default=1, help="q: execute every q-th action")
    p.add_argument("--prefill-fraction", type=float, default=0.15, help="faster: prefill share of the delay")
    p.add_argument("--seed", type=int, default=0, help="first episode seed (every cell runs the same seeds)")
    p.add_argument(
        "--workers", type=positive_int, default=os.cpu_count() or 1, help="worker processes (1: in this process)"
    )
    p.add_argument("--json", type=Path, default=None, help="write the summary and per-episode metrics here")
    p.add_argument("--plot", type=Path, default=None, help="write a PNG (success vs delay; reaction latency)")


def sweep_config(args: argparse.Namespace) -> SweepConfig:
    """The sweep the flags ask for, every flag checked (the policy loads in check_sweep, before any worker)."""
    source = policy_source(args, "eval", ACCEPTED)
    check_output_file(args.json, "--json")
    check_output_file(args.plot, "--plot")
    if args.plot is not None:
        import matplotlib  # noqa: F401  (the sim extra: missing is said now, not after the sweep)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if not modes:
        raise ConfigError(f"--modes: give at least one of {','.join(MODES)}")
    if not args.delays:
        raise ConfigError("--delays: give at least one delay, e.g. 0,2,4")
    execution = ExecutionConfig(
        mode=modes[0],
        delay=0,
        execution_horizon=args.execution_horizon,
        quantization=args.quantization,
        prefill_fraction=args.prefill_fraction,
    )
    return SweepConfig(
        task=args.task,
        policy=ORACLE if source.kind is PolicyKind.ORACLE else str(source.path),
        modes=modes,
        delays=args.delays,
        episodes=args.episodes,
        execution=execution,
        seed=args.seed,
        workers=args.workers,
    )


def run(args: argparse.Namespace) -> int:
    cfg = sweep_config(args)
    console = Console(width=max(Console().width, 140))  # the table has 10 columns
    total = len(cfg.modes) * len(cfg.delays) * cfg.episodes
    with progress(f"vlash eval: {args.task} episodes", total, transient=True) as update:
        episodes = run_sweep(cfg, progress=lambda i, n: update(i))
    summary = summarize(cfg, episodes)
    print_table(summary, console)
    if args.json:
        atomic_write(args.json, lambda f: f.write(json.dumps(summary, indent=1).encode()))
        console.print(f"wrote {args.json}")
    if args.plot:
        console.print(f"wrote {plot_summary(summary, args.plot)}")
    return 0
