"""Episode runners for the scripted expert, on time or with stale information (for tests and benchmarks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robot_io.sim.env import ArmEnv
from robot_io.sim.errors import SimConfigError


@dataclass
class EpisodeResult:
    """Outcome of one episode."""

    success: bool  # info["success"] at the last step
    steps: int  # control steps taken
    events: list[dict[str, Any]] = field(default_factory=list)  # all events, reset's included
    final_info: dict[str, Any] = field(default_factory=dict)  # info of the last step
    actions: np.ndarray | None = None  # [steps, J] commanded targets
    states: np.ndarray | None = None  # [steps + 1, J] observed joint positions


def run_expert_episode(env: ArmEnv, seed: int, reaction_delay: int = 0) -> EpisodeResult:
    """Run one episode with the closed-loop scripted expert, perceiving events `reaction_delay` steps late.

    The expert plans every step from the current arm state but only knows what was visible
    `reaction_delay` steps ago (a pure reaction latency: pop-ups and ball launches are seen late).
    """
    obs, info = env.reset(seed=seed)
    events, actions, states = list(info["events"]), [], [obs["state"]]
    terminated = truncated = False
    while not (terminated or truncated):
        action = env.expert_chunk(1, info_delay=reaction_delay)[0]
        obs, _, terminated, truncated, info = env.step(action)
        events.extend(info["events"])
        actions.append(action)
        states.append(obs["state"])
    return EpisodeResult(info["success"], env.step_index, events, info, np.array(actions), np.array(states))


def expert_success_rate(task: str, seeds: range | list[int], reaction_delay: int = 0, **env_kwargs: Any) -> float:
    """Fraction of `seeds` on which the (possibly late-reacting) expert solves `task`."""
    env = ArmEnv(task=task, **env_kwargs)
    wins = [run_expert_episode(env, seed, reaction_delay).success for seed in seeds]
    return float(np.mean(wins))


EXECUTION_MODES = ("sync", "naive_async", "future_state")


def run_chunked_episode(
    env: ArmEnv, seed: int, mode: str, delay: int, execute: int = 10, horizon: int = 50
) -> EpisodeResult:
    """The expert as a chunking policy with inference delay `delay` steps, one inference every `execute` steps.

    An inference starts at step k from the observation at k; its chunk is ready at k + delay.
    - sync: the robot holds still while inferring, then runs chunk[0:execute] (next inference after).
    - naive_async: the previous chunk keeps running during inference; chunk[delay:delay + execute]
      (planned from the stale state at k) runs from k + delay.
    - future_state: (VLASH) the chunk is planned from the command the previous chunk will have sent
      at k + delay - 1, starting at k + delay; chunk[0:execute] runs from k + delay.
    """
    if mode not in EXECUTION_MODES:
        raise SimConfigError(f"mode must be one of {EXECUTION_MODES}, got {mode!r}")
    if not (execute >= 1 and 0 <= delay <= min(execute, horizon - execute)):
        raise SimConfigError(
            f"need execute >= 1 and 0 <= delay <= min(execute, horizon - execute), got {delay=}, {execute=}, {horizon=}"
        )
    obs, info = env.reset(seed=seed)
    events, actions, states = list(info["events"]), [], [obs["state"]]
    queue: dict[int, np.ndarray] = {}  # step -> commanded target, filled as chunks arrive
    pending: tuple[int, np.ndarray] | None = None  # (ready step, actions by step) of the running inference
    hold = env.arm_state.command
    next_inference, terminated, truncated = 0, False, False
    while not (terminated or truncated):
        n = env.step_index
        if pending is not None and n >= pending[0]:
            queue.update(pending[1])
            pending = None
        if pending is None and n >= next_inference:
            pending = (n + delay, _infer(env, mode, queue, delay, execute, horizon))
            next_inference = n + (delay + execute if mode == "sync" else execute)
            if delay == 0:
                continue
        action = queue.pop(n, None)
        hold = hold if action is None else action
        obs, _, terminated, truncated, info = env.step(hold)
        events.extend(info["events"])
        actions.append(hold)
        states.append(obs["state"])
    return EpisodeResult(info["success"], env.step_index, events, info, np.array(actions), np.array(states))


def _infer(env: ArmEnv, mode: str, queue: dict[int, np.ndarray], delay: int, execute: int, horizon: int) -> dict:
    """Actions by absolute step of one inference started now."""
    n = env.step_index
    if mode == "future_state" and delay > 0 and n + delay - 1 in queue:
        last = queue[n + delay - 1]
        before = queue.get(n + delay - 2, env.arm_state.command)
        chunk = env.expert_chunk(horizon, state=last, start_offset=delay, velocity=(last - before) / env.dt)
        return {n + delay + i: chunk[i] for i in range(execute)}
    chunk = env.expert_chunk(horizon)
    start = delay if mode == "naive_async" else 0
    return {n + delay + i: chunk[start + i] for i in range(execute)}
