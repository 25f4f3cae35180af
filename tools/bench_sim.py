"""Measurements of the simulator (vlash.sim): env speed, render time, expert success vs. reaction delay, and the
expert per action interface and load (vlash/sim/README.md's tables).

python tools/bench_sim.py --seeds 100 --delays 0 2 4 6 8 10
python tools/bench_sim.py --seeds 100 --interface-table hold   # expert success per interface and load
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vlash.sim.disturbance import DisturbanceConfig
from vlash.sim.env import TASKS, ArmEnv, make_env
from vlash.sim.interfaces import INTERFACES
from vlash.sim.rollout import expert_success_rate, run_expert_episode, run_open_loop_episode


def step_timings(task: str, image_size: int, steps: int = 3000) -> tuple[float, float, float]:
    """(env.step calls per second incl. rendering, expert_action calls per second, mean reset ms)."""
    env = ArmEnv(task=task, image_size=image_size)
    step_s = expert_s = reset_s = 0.0
    resets, done = 0, True
    for _ in range(steps):
        if done:
            start = time.perf_counter()
            env.reset(seed=resets)
            reset_s += time.perf_counter() - start
            resets += 1
        start = time.perf_counter()
        action = env.expert_action()
        expert_s += time.perf_counter() - start
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        step_s += time.perf_counter() - start
        done = terminated or truncated
    return steps / step_s, steps / expert_s, 1e3 * reset_s / resets


def render_ms(image_size: int, frames: int = 2000) -> float:
    """Median time of one frame (arm + 3 targets) in milliseconds."""
    env = ArmEnv(task="reach", image_size=image_size)
    env.reset(seed=0)
    times = []
    for _ in range(frames):
        start = time.perf_counter()
        env._observe()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def interface_table(task: str, seeds: int, loads: list[float], chunk: int = 10) -> None:
    """Success of the closed-loop expert and of an open-loop chunked one (plans `chunk` steps from the observed
    state every `chunk` steps, no delay) per action interface and joint load (kind "load", peak rad/s)."""
    print(f"{task}: expert success, closed loop / open loop every {chunk} steps, by load [rad/s]")
    print("interface  " + " ".join(f"{load:>11.2f}" for load in loads))
    for interface in INTERFACES:
        cells = []
        for load in loads:
            disturbance = DisturbanceConfig("load" if load > 0 else "none", load)
            env = make_env(task, image_size=16, action_interface=interface, disturbance=disturbance)
            closed = np.mean([run_expert_episode(env, seed).success for seed in range(seeds)])
            opened = np.mean([run_open_loop_episode(env, seed, chunk).success for seed in range(seeds)])
            cells.append(f"{closed:4.2f} / {opened:4.2f}")
        print(f"{interface:10s} " + " ".join(f"{cell:>11s}" for cell in cells))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100, help="episodes per task and setting")
    parser.add_argument("--delays", type=int, nargs="+", default=[0, 2, 4, 6, 8, 10], help="delays [steps]")
    parser.add_argument("--image-size", type=int, default=96)
    parser.add_argument("--steps", type=int, default=3000, help="env steps timed per task")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--interface-table", choices=TASKS, help="only: success per action interface and load")
    parser.add_argument("--loads", type=float, nargs="+", default=[0.0, 0.15, 0.3], help="joint loads [rad/s]")
    args = parser.parse_args(argv)
    if args.interface_table:
        interface_table(args.interface_table, args.seeds, args.loads)
        return
    print(f"render {args.image_size}px: {render_ms(args.image_size):.3f} ms/frame (median)")
    for task in args.tasks:
        steps, expert, reset = step_timings(task, args.image_size, args.steps)
        print(f"{task:10s} env.step {steps:6.0f}/s, expert_action {expert:6.0f}/s, reset {reset:5.1f} ms")
    print("closed-loop expert success by reaction delay: " + " ".join(f"d={d}" for d in args.delays))
    for task in args.tasks:
        rates = [expert_success_rate(task, range(args.seeds), d, image_size=32) for d in args.delays]
        print(f"{task:10s} " + " ".join(f"{r:4.2f}" for r in rates))
    print("chunked execution modes under delay: `vlash eval --policy oracle` (vlash/eval)")


if __name__ == "__main__":
    main()
