"""Simulated rollouts of a policy under a given engine (vlash.eval harness): success rate and jerk.

Only meaningful for a trained policy (e.g. checkpoints/pi05-tiny-sim); the fp32 torch engine is the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from robot_io.executors import ExecutorConfig
from vlash.engines.base import Engine
from vlash.eval.episode import EpisodeRunner
from vlash.eval.link import LinkTiming
from vlash.eval.metrics import episode_metrics
from vlash.eval.policies import LearnedPolicy
from vlash.planar_arm import forward
from vlash.policies.formats.base import LoadedPolicy
from vlash.runtime.policy_runtime import PolicyRuntime


@dataclass
class RolloutStats:
    episodes: int  # episodes run (over all tasks)
    success_rate: float  # share solved
    jerk: float  # mean over episodes of the mean squared jerk of commanded joints (rad^2/s^6)

    def to_dict(self) -> dict:
        return asdict(self)


def rollout_stats(
    policy: LoadedPolicy,
    engine: Engine | None,
    tasks: Sequence[str],
    episodes_per_task: int = 3,
    seed: int = 200_000,
    image_size: int = 96,
) -> RolloutStats:
    """Synchronous episodes on a zero-latency link (d = 0: each chunk runs in the step of its request) per task;
    `engine` None runs the policy's own torch model."""
    from vlash.sim import make_env  # extra: sim

    chunk_policy = LearnedPolicy(policy)
    if engine is not None:  # same request path, other engine
        chunk_policy.runtime = PolicyRuntime(policy, engine, num_steps=chunk_policy.num_steps)
    results = []
    with torch.no_grad():
        for task in tasks:
            env = make_env(task, seed=0, image_size=image_size)
            links = env.arm_config.link_lengths
            runner = EpisodeRunner(env, chunk_policy, ExecutorConfig(mode="sync"), LinkTiming(0), task)
            for i in range(episodes_per_task):
                trace = runner.run(seed + i)
                results.append(episode_metrics(trace, lambda q, links=links: forward(q, links)))
    return RolloutStats(
        episodes=len(results),
        success_rate=float(np.mean([r.success for r in results])) if results else 0.0,
        jerk=float(np.mean([r.jerk for r in results])) if results else 0.0,
    )


def rollout_gate(reference: RolloutStats, candidate: RolloutStats, max_success_drop: float, max_jerk_ratio: float):
    """Failure reasons of the rollout metrics (empty: pass)."""
    reasons = []
    if candidate.success_rate < reference.success_rate - max_success_drop - 1e-9:
        reasons.append(
            f"success {candidate.success_rate:.0%} < fp32 {reference.success_rate:.0%} - {max_success_drop:.0%}"
        )
    if reference.jerk > 0 and candidate.jerk > reference.jerk * max_jerk_ratio:
        reasons.append(f"jerk {candidate.jerk:.3g} > {max_jerk_ratio} x fp32 {reference.jerk:.3g}")
    return reasons
