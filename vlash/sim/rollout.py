"""Episode runners for the scripted expert, on time or with stale information (for tests and benchmarks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vlash.sim.env import ArmEnv


@dataclass
class EpisodeResult:
    """Outcome of one episode."""

    success: bool  # info["success"] at the last step
    steps: int  # control steps taken
    events: list[dict[str, Any]] = field(default_factory=list)  # all events, reset's included
    final_info: dict[str, Any] = field(default_factory=dict)  # info of the last step
    actions: np.ndarray | None = None  # [steps, A] actions sent (in the env's action interface)
    states: np.ndarray | None = None  # [steps + 1, S] observed states


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


def run_open_loop_episode(env: ArmEnv, seed: int, chunk: int = 10) -> EpisodeResult:
    """Run one episode with the expert planning `chunk` steps from the observed state every `chunk` steps and
    executing them open loop (no inference delay): how far an unmodelled load drifts a plan between updates."""
    obs, info = env.reset(seed=seed)
    events, actions, states = list(info["events"]), [], [obs["state"]]
    terminated = truncated = False
    while not (terminated or truncated):
        for action in env.expert_chunk(chunk, state=obs["state"]):
            obs, _, terminated, truncated, info = env.step(action)
            events.extend(info["events"])
            actions.append(action)
            states.append(obs["state"])
            if terminated or truncated:
                break
    return EpisodeResult(info["success"], env.step_index, events, info, np.array(actions), np.array(states))


def expert_success_rate(task: str, seeds: range | list[int], reaction_delay: int = 0, **env_kwargs: Any) -> float:
    """Fraction of `seeds` on which the (possibly late-reacting) expert solves `task`."""
    env = ArmEnv(task=task, **env_kwargs)
    wins = [run_expert_episode(env, seed, reaction_delay).success for seed in seeds]
    return float(np.mean(wins))
