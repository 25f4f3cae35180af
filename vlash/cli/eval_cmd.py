"""`vlash eval --task reach --policy PATH|oracle --modes ... --delays ... --episodes N --json F --plot F`."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from vlash.atomic import atomic_write
from vlash.errors import ConfigError
from vlash.eval.modes import MODES, ExecutionConfig
from vlash.eval.report import plot_summary, print_table
from vlash.eval.sweep import ORACLE, SweepConfig, run_sweep, summarize


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="simulated success / reaction / smoothness vs inference delay per mode")
    p.add_argument("--task", required=True, help="reach, track, whack or intercept")
    p.add_argument("--policy", required=True, help=f"a policy directory, or '{ORACLE}' for the scripted expert")
    p.add_argument("--modes", default="sync,naive,vlash,faster", help=f"comma-separated, from {','.join(MODES)}")
    p.add_argument("--delays", type=_ints, default=(0, 2, 4), help="inference delays in control steps, e.g. 0,2,4")
    p.add_argument("--episodes", type=int, default=50, help="episodes per (mode, delay)")
    p.add_argument(
        "--execution-horizon",
        type=int,
        default=10,
        help="s: actions run per chunk (faster may go below d: its sampler stops early)",
    )
    p.add_argument("--quantization", type=int, default=1, help="q: execute every q-th action")
    p.add_argument("--prefill-fraction", type=float, default=0.15, help="faster: prefill share of the delay")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json", type=Path, default=None, help="write the summary and per-episode metrics here")
    p.add_argument("--plot", type=Path, default=None, help="write a PNG (success vs delay; reaction latency)")


def run(args: argparse.Namespace) -> int:
    modes = tuple(m for m in args.modes.split(",") if m)
    if args.policy != ORACLE and not Path(args.policy).is_dir():
        raise ConfigError(f"--policy {args.policy!r} is neither '{ORACLE}' nor a policy directory")
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    execution = ExecutionConfig(
        mode=modes[0] if modes else "sync",
        delay=0,
        execution_horizon=args.execution_horizon,
        quantization=args.quantization,
        prefill_fraction=args.prefill_fraction,
    )
    cfg = SweepConfig(
        task=args.task,
        policy=args.policy,
        modes=modes,
        delays=args.delays,
        episodes=args.episodes,
        execution=execution,
        seed=args.seed,
        workers=args.workers,
    )
    console = Console(width=max(Console().width, 140))  # the table has 10 columns
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(f"eval {args.task}", total=len(modes) * len(args.delays) * args.episodes)
        episodes = run_sweep(cfg, progress=lambda i, n: bar.update(task, completed=i))
    summary = summarize(cfg, episodes)
    print_table(summary, console)
    if args.json:
        atomic_write(args.json, lambda f: f.write(json.dumps(summary, indent=1).encode()))
        console.print(f"wrote {args.json}")
    if args.plot:
        console.print(f"wrote {plot_summary(summary, args.plot)}")
    return 0
