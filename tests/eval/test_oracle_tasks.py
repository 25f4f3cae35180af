"""The scripted-expert oracle through the harness on the simulator's tasks: what each mode does to it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_io.executors import ExecutorConfig
from vlash.eval.episode import EpisodeRunner
from vlash.eval.link import LinkTiming
from vlash.eval.metrics import boundary_jump
from vlash.eval.policies import OraclePolicy
from vlash.sim import make_env
from vlash.sim.settings import load_sim_settings

VELOCITY_LOAD = Path(__file__).parents[2] / "configs" / "eval" / "velocity-load.yaml"


def _chunked(env, seed: int, mode: str, delay: int):
    """The scripted expert as a chunking policy under the robot's executor (execution horizon 10)."""
    return EpisodeRunner(env, OraclePolicy(), ExecutorConfig(mode=mode, execution_horizon=10), LinkTiming(delay)).run(
        seed
    )


def test_sync_execution_with_inference_delay_fails_on_track():
    env = make_env("track", image_size=32)
    seeds = range(12)
    fast = np.mean([_chunked(env, s, "sync", 0).success for s in seeds])
    slow = np.mean([_chunked(env, s, "sync", 6).success for s in seeds])
    future = np.mean([_chunked(env, s, "vlash", 6).success for s in seeds])
    assert fast >= 0.9 and future >= 0.9 and slow <= 0.3, (fast, slow, future)


def test_naive_async_jumps_at_chunk_boundaries_and_future_state_does_not():
    env = make_env("whack", image_size=32)
    jumps = {}
    for mode in ("naive", "vlash"):
        traces = [_chunked(env, s, mode, 4) for s in range(4)]
        jumps[mode] = max(boundary_jump(np.stack(t.commands), t.switch_steps) for t in traces)
    assert jumps["naive"] > 4 * jumps["vlash"], jumps


def test_with_velocity_actions_under_load_the_future_state_finishes_sooner_than_naive():
    # the regime where a stale plan costs: integrated actions and an unmodelled load (configs/eval/velocity-load.yaml)
    env = make_env("hold", image_size=32, settings=load_sim_settings(VELOCITY_LOAD))
    seeds = range(12)
    steps = {mode: [_chunked(env, s, mode, 4) for s in seeds] for mode in ("naive", "vlash")}
    mean_steps = {mode: np.mean([t.steps for t in traces]) for mode, traces in steps.items()}
    assert mean_steps["vlash"] < 0.9 * mean_steps["naive"], mean_steps
    assert all(t.interface == "velocity" for t in steps["vlash"])
