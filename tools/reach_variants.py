"""Does a faster arm or a tighter reach make naive async lose to the future state? (oracle, d = 4)

Issue 3 asks, if naive async shows no loss against the future-state methods, to make motions faster or
tolerances tighter until it does. This runs the scripted-expert oracle on reach variants: the servo's
speed and acceleration scaled (the expert plans at 90% of the servo's speed, so it moves faster too), the
touch radius shrunk, the time limit cut. Each row: success, mean steps to the touch and chunk switches
per episode, for sync at d = 0 and naive / vlash at d = 4 (the robot's executors on vlash eval's simulated link;
the same seeds in every cell).

    python tools/reach_variants.py --episodes 30
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from multiprocessing import Pool

import numpy as np
from rich.console import Console
from rich.table import Table

from robot_io.executors import ExecutorConfig
from vlash.eval.episode import EpisodeRunner
from vlash.eval.link import LinkTiming
from vlash.eval.policies import OraclePolicy
from vlash.sim.config import ArmConfig
from vlash.sim.env import make_env
from vlash.sim.tasks.reach import ReachConfig

CELLS = (("sync", 0), ("naive", 4), ("vlash", 4))


@dataclass(frozen=True)
class Variant:
    speed: float  # servo max velocity and acceleration scale (acceleration by speed^2: same profile, faster)
    touch_radius: float  # reach's touch tolerance (world units)
    max_steps: int  # time limit (control steps at 30 Hz)

    def env(self):
        base = ArmConfig()
        arm = ArmConfig(
            max_velocity=base.max_velocity * self.speed, max_acceleration=base.max_acceleration * self.speed**2
        )
        return make_env(
            "reach", seed=0, arm=arm, task_config=ReachConfig(touch_radius=self.touch_radius, max_steps=self.max_steps)
        )


VARIANTS = (
    Variant(1.0, 0.06, 105),  # the shipped task
    Variant(2.0, 0.06, 105),
    Variant(1.0, 0.03, 105),
    Variant(2.0, 0.03, 105),
    Variant(1.0, 0.06, 30),
)


def _episode(job: tuple[Variant, str, int, int]) -> tuple[Variant, str, int, bool, int, int]:
    variant, mode, delay, seed = job
    executor = ExecutorConfig(mode=mode)  # s = 10; the episode measures d online from its first (sync) request
    trace = EpisodeRunner(variant.env(), OraclePolicy(), executor, LinkTiming(delay), task="reach").run(seed)
    return variant, mode, delay, trace.success, trace.steps, len(trace.switch_steps)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    jobs = [(v, m, d, seed) for v in VARIANTS for m, d in CELLS for seed in range(args.episodes)]
    results: dict[tuple, list] = {}
    with Pool(args.workers) as pool:
        for variant, mode, delay, success, steps, switches in pool.imap(_episode, jobs, chunksize=4):
            results.setdefault((variant, mode, delay), []).append((success, steps, switches))
    table = Table("speed x", "touch radius", "time limit", *(f"{m} d={d}" for m, d in CELLS))
    for v in VARIANTS:
        cells = []
        for m, d in CELLS:
            rows = np.array(results[(v, m, d)], dtype=float)
            wins = rows[:, 0].astype(bool)
            steps = rows[wins, 1].mean() if wins.any() else float("nan")
            cells.append(f"{100 * wins.mean():.0f}% · {steps:.1f} steps · {rows[:, 2].mean():.1f} sw")
        table.add_row(f"{v.speed:g}", f"{v.touch_radius:g}", str(v.max_steps), *cells)
    Console(width=140).print(table)
    print("cells: success · mean steps to the touch (successes) · chunk switches per episode")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
