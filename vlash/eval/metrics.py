"""Episode metrics (docs/METHODS.md "Metrics") and their aggregation with 95% intervals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from vlash.eval.episode import EpisodeTrace
from vlash.eval.stats import bootstrap_mean, wilson_interval

# A commanded end-effector step counts as motion toward a target when it brings the end effector at least
# this much closer along the target direction (workspace units per control step, ~0.15 units/s at 30 Hz).
# Progress, not heading: joint-space plans sweep the end effector along an arc, and one that starts toward
# the target at 45 degrees is moving toward it.
MIN_PROGRESS = 0.005


@dataclass
class EpisodeMetrics:
    task: str
    mode: str
    delay: int
    seed: int
    success: bool
    steps: int
    completion_s: float  # time to success; an episode that did not succeed counts the time limit (censored)
    # per event: appear -> first commanded motion toward where it was touched/intercepted (or where it
    # appeared, if it never was), from a plan that saw it
    reaction_s: list[float] = field(default_factory=list)
    touch_s: list[float] = field(default_factory=list)  # per event: appear -> touch / intercept
    missed_events: int = 0  # events with no motion toward them before the episode ended
    jerk: float = 0.0  # mean squared jerk of the commanded positions (joints: rad^2 / s^6; ee_delta: world units)
    max_boundary_jump: float = 0.0  # largest velocity discontinuity at a chunk switch (rad, see boundary_jump)
    hold_fraction: float = 0.0  # share of steps the hold was sent (waiting for a chunk, or a missed deadline)
    missed_steps: int = 0  # steps the running chunk had no action in time (missed deadlines)
    requests: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def mean_squared_jerk(commands: np.ndarray, dt: float) -> float:
    if len(commands) < 4:
        return 0.0
    jerk = np.diff(commands, n=3, axis=0) / dt**3
    return float(np.mean(np.sum(jerk**2, axis=1)))


def boundary_jump(commands: np.ndarray, switch_steps: Sequence[int]) -> float:
    """Largest jump at a chunk switch: how far the command at the switch lands from where the previous
    command velocity would have taken it, ||(a_k - a_(k-1)) - (a_(k-1) - a_(k-2))|| (rad, L2 over joints)."""
    jumps = [
        float(np.linalg.norm(commands[k] - 2 * commands[k - 1] + commands[k - 2]))
        for k in switch_steps
        if 1 < k < len(commands)
    ]
    return max(jumps, default=0.0)


def reaction_steps(
    ee: np.ndarray, start: int, target: np.ndarray, plan_steps: Sequence[int] | None = None
) -> int | None:
    """Steps from `start` (the first observation showing the event) to the first commanded end-effector step
    that moves toward `target` and comes from a plan made at or after `start` (`plan_steps[k]`: the
    observation step behind command k). Motion left over from an older plan that happens to head the
    right way is not a reaction."""
    for k in range(max(start, 1), len(ee)):
        if plan_steps is not None and plan_steps[k] < start:
            continue
        to_target = target - ee[k - 1]
        distance = np.linalg.norm(to_target)
        if distance > 0 and (ee[k] - ee[k - 1]) @ to_target / distance >= MIN_PROGRESS:
            return k - start
    return None


def commanded_path(trace: EpisodeTrace) -> np.ndarray:
    """[T, D] the positions the commands ask for: joint targets as sent (position), the observed start integrated by
    the commanded velocities (velocity), or the end-effector start plus the increments (ee_delta)."""
    commands = np.stack(trace.commands) if trace.commands else np.zeros((0, 2))
    if trace.interface == "position" or not len(commands):
        return commands
    start = np.asarray(trace.states[0], np.float64)[: commands.shape[1]]  # the entries the commands act on
    scale = trace.dt if trace.interface == "velocity" else 1.0
    return start + scale * np.cumsum(commands, axis=0)


def episode_metrics(trace: EpisodeTrace, fk: Callable[[np.ndarray], np.ndarray]) -> EpisodeMetrics:
    """Metrics of one trace; `fk` maps joint positions [J] to the end-effector position [2] (an ee_delta trace's
    path is already in end-effector space)."""
    path = commanded_path(trace)
    m = EpisodeMetrics(
        task=trace.task,
        mode=trace.mode,
        delay=trace.delay,
        seed=trace.seed,
        success=trace.success,
        steps=trace.steps,
        completion_s=(trace.steps if trace.success else trace.max_steps) * trace.dt,
        jerk=mean_squared_jerk(path, trace.dt),
        max_boundary_jump=boundary_jump(path, trace.switch_steps),
        hold_fraction=trace.hold_steps / max(trace.steps, 1),
        missed_steps=trace.missed_steps,
        requests=trace.requests,
    )
    ee_space = trace.interface == "ee_delta"
    ee = path if ee_space else np.stack([fk(c) for c in path]) if len(path) else np.zeros((0, 2))
    events = [*trace.reset_events, *(ev for info in trace.infos for ev in info.get("events", ()))]
    met = {ev["id"]: ev for ev in events if ev["kind"] in ("touch", "intercept")}
    for ev in events:
        if ev["kind"] != "appear":
            continue
        # "toward it": toward where the arm met it (a moving ball is met ahead of where it appeared)
        goal = met[ev["id"]]["xy"] if ev["id"] in met else ev["xy"]
        react = reaction_steps(ee, ev["step"], np.asarray(goal, float), trace.plan_steps)
        if react is None:
            m.missed_events += 1
        else:
            m.reaction_s.append(react * trace.dt)
        if ev["id"] in met:
            m.touch_s.append((met[ev["id"]]["step"] - ev["step"]) * trace.dt)
    return m


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def aggregate(episodes: Sequence[EpisodeMetrics]) -> dict:
    """Summary of episodes of one (task, mode, delay) cell."""
    n = len(episodes)
    wins = sum(e.success for e in episodes)
    low, high = wilson_interval(wins, n)
    reactions = [r for e in episodes for r in e.reaction_s]
    completion = bootstrap_mean([e.completion_s for e in episodes])
    return {
        "n": n,
        "success_rate": wins / n if n else 0.0,
        "ci95": [low, high],
        "completion_s": None if completion is None else completion[0],  # all episodes, failures at the limit
        "completion_ci95": None if completion is None else list(completion[1:]),
        "reaction_mean_s": _mean(reactions),
        "reaction_p95_s": float(np.percentile(reactions, 95)) if reactions else None,
        "touch_mean_s": _mean([t for e in episodes for t in e.touch_s]),
        "missed_events": sum(e.missed_events for e in episodes),
        "jerk": _mean([e.jerk for e in episodes]),
        "boundary_jump": _mean([e.max_boundary_jump for e in episodes]),
        "hold_fraction": _mean([e.hold_fraction for e in episodes]),
        "missed_steps": sum(e.missed_steps for e in episodes),
    }
