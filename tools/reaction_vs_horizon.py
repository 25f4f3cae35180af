"""Reaction latency against the execution horizon s at one delay: how often each mode can re-plan.

Sync stops for every inference, so a short s costs it motion; the asynchronous modes need s >= d; faster,
whose sampler stops once the next s actions are final, can re-plan every 1-2 steps at d = 4. One
`vlash eval` sweep per s (the robot's executors on the simulated link, the same seeds in every cell); (mode, s)
pairs that a mode cannot run are listed as skipped. Writes a JSON of the cells and a PNG (mean reaction latency
vs s, success vs s).

    python tools/reaction_vs_horizon.py --task whack --delay 4 --horizons 1,2,4,10,25 \
        --modes sync,naive,vlash,faster --episodes 30 --json docs/eval/oracle-whack-horizon.json \
        --plot docs/eval/oracle-whack-horizon.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from robot_io.executors import ExecutorConfig
from vlash.atomic import atomic_write
from vlash.eval.link import LinkTiming
from vlash.eval.metrics import aggregate
from vlash.eval.sweep import SweepConfig, check_cell, run_sweep


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def executor(mode: str, s: int) -> ExecutorConfig:
    """The cell's executor settings; its initial d is set per episode (EpisodeRunner), 1 fits every s."""
    return ExecutorConfig(mode=mode, execution_horizon=s, initial_delay=1)


def sweep(args: argparse.Namespace) -> dict:
    cells, skipped = [], []
    for s in args.horizons:
        modes = []
        for mode in args.modes:
            try:
                check_cell(executor(mode, s), args.delay, args.chunk_length)
                modes.append(mode)
            except ValueError as err:  # ConfigError, or the executor's ShapeError
                skipped.append({"mode": mode, "execution_horizon": s, "why": str(err)})
        if not modes:
            continue
        cfg = SweepConfig(
            task=args.task,
            policy=args.policy,
            modes=tuple(modes),
            delays=(args.delay,),
            episodes=args.episodes,
            executor=executor(modes[0], s),
            timing=LinkTiming(args.delay, prefill_share=args.prefill_share),
            seed=args.seed,
            workers=args.workers,
        )
        episodes = run_sweep(cfg)
        for mode in modes:
            chosen = [e for e in episodes if e.mode == mode]
            cells.append({"mode": mode, "delay": args.delay, "execution_horizon": s, **aggregate(chosen)})
        print(f"s = {s}: {', '.join(modes)} done", flush=True)
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "plot")}
    return {"settings": settings, "cells": cells, "skipped": skipped}


def print_cells(result: dict, console: Console) -> None:
    table = Table("mode", "s", "success %", "reaction ms (mean / p95)", "touch ms", "missed events")
    for c in result["cells"]:
        react = c["reaction_mean_s"]
        table.add_row(
            c["mode"],
            str(c["execution_horizon"]),
            f"{100 * c['success_rate']:.0f}",
            "-" if react is None else f"{1000 * react:.0f} / {1000 * c['reaction_p95_s']:.0f}",
            "-" if c["touch_mean_s"] is None else f"{1000 * c['touch_mean_s']:.0f}",
            str(c["missed_events"]),
        )
    console.print(table)
    for s in result["skipped"]:
        console.print(f"skipped {s['mode']} at s = {s['execution_horizon']}: {s['why']}")


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    st = result["settings"]
    fig, (ax_r, ax_s) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for mode in dict.fromkeys(c["mode"] for c in result["cells"]):
        cells = [c for c in result["cells"] if c["mode"] == mode and c["reaction_mean_s"] is not None]
        xs = [c["execution_horizon"] for c in cells]
        ax_r.plot(xs, [1000 * c["reaction_mean_s"] for c in cells], marker="o", label=mode)
        ax_s.plot(xs, [100 * c["success_rate"] for c in cells], marker="o", label=mode)
    ax_r.set(
        xlabel="execution horizon s (control steps)",
        ylabel="mean reaction latency (ms)",
        xscale="log",
        title=f"{st['task']}, d = {st['delay']}: event -> first motion toward it",
    )
    ax_s.set(
        xlabel="execution horizon s (control steps)",
        ylabel="success rate (%)",
        xscale="log",
        ylim=(-3, 103),
        title=f"{st['task']}, d = {st['delay']}: success ({st['episodes']} episodes/point)",
    )
    for ax in (ax_r, ax_s):
        ax.set_xticks(st["horizons"], [str(s) for s in st["horizons"]])
        ax.grid(alpha=0.3)
    ax_r.legend(fontsize=8)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="whack")
    p.add_argument("--policy", default="oracle", help="'oracle' or a policy directory")
    p.add_argument("--delay", type=int, default=4)
    p.add_argument("--horizons", type=_ints, default=(1, 2, 4, 10, 25))
    p.add_argument("--modes", type=lambda t: tuple(m for m in t.split(",") if m), default=("sync", "faster"))
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--chunk-length", type=int, default=50, help="the policy's H, to skip (s + d) * q > H up front")
    p.add_argument("--prefill-share", type=float, default=0.15, help="share of the delay spent in prefill")
    p.add_argument("--seed", type=int, default=0, help="first episode seed (vlash eval's splits: dev 0, report 100000)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--plot", type=Path, default=None)
    args = p.parse_args()
    result = sweep(args)
    print_cells(result, Console(width=120))
    if args.json:
        atomic_write(args.json, lambda f: f.write(json.dumps(result, indent=1).encode()))
    if args.plot:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
