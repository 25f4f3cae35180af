"""`vlash eval --task reach --policy PATH|oracle --modes ... --delays ... --episodes N --json F --plot F`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console

from robot_io.executors import EXECUTION_MODES, STATE_SOURCES, ExecutorConfig
from vlash.cli.policy_args import add_policy_arguments, policy_source
from vlash.cli.preflight import check_output_file, positive_int
from vlash.cli.sim_args import add_sim_arguments, load_sim_arguments
from vlash.errors import ConfigError
from vlash.eval.link import LinkTiming
from vlash.eval.report import plot_summary, print_table, write_summary
from vlash.eval.sweep import SEED_SPLITS, SweepConfig, run_sweep, summarize
from vlash.policies.names.source import ORACLE, PolicyKind
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
    p.add_argument("--task", required=True, help="reach, hold, track, whack or intercept")
    add_sim_arguments(p, "to evaluate in")
    add_policy_arguments(p, "the policy to evaluate", ACCEPTED)
    p.add_argument(
        "--modes", default="sync,naive,vlash,faster", help=f"comma-separated, from {','.join(EXECUTION_MODES)}"
    )
    p.add_argument("--delays", type=_ints, default=(0, 2, 4), help="inference delays in control steps, e.g. 0,2,4")
    p.add_argument("--episodes", type=positive_int, default=50, help="episodes per (mode, delay)")
    p.add_argument(
        "--execution-horizon",
        type=int,
        default=10,
        help="s: actions run per chunk (faster may go below d: its sampler stops early)",
    )
    p.add_argument("--quantization", type=int, default=1, help="q: execute every q-th action")
    p.add_argument(
        "--prefill-share", type=float, default=0.15, help="share of the delay spent in prefill (streamed replies)"
    )
    p.add_argument(
        "--state-source",
        default="observed",
        choices=STATE_SOURCES,
        help="state sent by the modes that do not roll it forward: measured, or the last command (what vlash sends "
        "at d = 0)",
    )
    p.add_argument("--ensemble-every", type=positive_int, default=2, help="ensemble: control steps between requests")
    p.add_argument(
        "--split",
        default="dev",
        choices=tuple(SEED_SPLITS),
        help=f"seed range: dev (tuning, from {SEED_SPLITS['dev']}) or report (published results, from "
        f"{SEED_SPLITS['report']})",
    )
    p.add_argument("--seed", type=int, default=None, help="first episode seed (default: the split's first)")
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
        import matplotlib  # noqa: F401  # extra: sim (missing is said now, not after the sweep)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    unknown = [m for m in modes if m not in EXECUTION_MODES]
    if not modes or unknown:
        raise ConfigError(f"--modes: {unknown or 'none given'}; choose from {','.join(EXECUTION_MODES)}")
    if not args.delays:
        raise ConfigError("--delays: give at least one delay, e.g. 0,2,4")
    sim = load_sim_arguments(args)
    try:
        executor = ExecutorConfig(
            mode=modes[0],
            initial_delay=1,  # each episode sets its own (vlash.eval.episode.executor_config)
            execution_horizon=args.execution_horizon,
            quantization=args.quantization,
            state_source=args.state_source,
            ensemble_every=args.ensemble_every,
        )
        timing = LinkTiming(delay=0, prefill_share=args.prefill_share)
    except ValueError as exc:  # one line naming the setting
        raise ConfigError(str(exc)) from None
    return SweepConfig(
        task=args.task,
        policy=ORACLE if source.kind is PolicyKind.ORACLE else str(source.path),
        modes=modes,
        delays=args.delays,
        episodes=args.episodes,
        executor=executor,
        timing=timing,
        seed=SEED_SPLITS[args.split] if args.seed is None else args.seed,
        sim=sim,
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
        write_summary(args.json, summary)
        console.print(f"wrote {args.json}")
    if args.plot:
        console.print(f"wrote {plot_summary(summary, args.plot)}")
    return 0
