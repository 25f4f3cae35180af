"""Expert demonstrations: one `Episode` per rollout of a simulated task's scripted expert.

`record_episodes` runs `vlash.sim`'s expert (`env.expert_action()`: absolute joint targets, or joint
velocities in the simulator's velocity interface) from `reset` until the episode terminates or is truncated,
keeping every frame's camera image, the observed state (the joints, then any extras the simulator observes:
SimSettings.observe) and the commanded action, and optionally the
expert's plan past the last frame (the tail: chunk labels for the frames near the end) and the plan the expert
made at every frame (`plans`: chunk labels that hold only what was visible at that frame). Save / load:
`vlash.train.dataset`.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from vlash.policies.processing.transforms import StateActionTransform
from vlash.train.chunked_demos import ChunkedExecution
from vlash.train.errors import DatasetError, TrainError
from vlash.train.progress import progress_bar

if TYPE_CHECKING:
    from vlash.sim.settings import SimSettings


@dataclass(frozen=True)
class Episode:
    """One demonstration; frame `t` pairs the observation at `t` with the action commanded at `t`."""

    task: str  # simulated task name ("reach", "track", ...)
    instruction: str  # language instruction given to the policy
    images: np.ndarray  # uint8 [T, S, S, 3] camera frames
    # float32 [T, D] observed state: the J entries the actions act on (the joints), then the extras `state_names`
    # names (vlash.sim.observations: joint velocities, the target); D = J without extras
    states: np.ndarray
    actions: np.ndarray  # float32 [T, J] commanded absolute joint targets (velocity interface: joint velocities)
    seed: int  # reset seed that reproduces the episode
    success: bool = True  # whether the expert solved the task in this episode
    # float32 [K, J]: what the expert would command in the K steps after the last frame (labels only, no
    # frames). A reach episode ends the moment the target is touched, with the arm still moving; without the
    # tail, every chunk label past that moment is padding, so no label ever shows the arm settling on a target.
    tail: np.ndarray | None = None
    # float32 [T, K, J]: the expert's plan at each frame, `env.expert_chunk(K)` before the step: the K targets it
    # would command from there with what it could see at that frame. On `whack` a target pops up inside nearly
    # every chunk of commanded actions, so a chunk label cut from `actions` holds a move to a target the frame
    # does not show; a plan label does not (`build_sample` uses the plans when they are present).
    plans: np.ndarray | None = None
    # the names of the D state entries (the simulator's env.state_names); () for a state of the J joints alone. A
    # state longer than the action needs them: the extras are then known, and the first J entries are the joints
    state_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        name = f"episode {self.task!r} seed {self.seed}"
        for field, arr, dtype, ndim in (
            ("images", self.images, np.uint8, 4),
            ("states", self.states, np.float32, 2),
            ("actions", self.actions, np.float32, 2),
        ):
            if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.ndim != ndim:
                got = f"{arr.dtype} {arr.shape}" if isinstance(arr, np.ndarray) else type(arr).__name__
                raise DatasetError(f"{name}: {field} must be {np.dtype(dtype)} with {ndim} axes, got {got}")
        length = self.images.shape[0]
        if length < 1 or self.states.shape[0] != length or self.actions.shape[0] != length:
            raise DatasetError(
                f"{name}: frame counts differ or are zero: images {self.images.shape[0]}, "
                f"states {self.states.shape[0]}, actions {self.actions.shape[0]}"
            )
        if self.images.shape[3] != 3 or self.images.shape[1] != self.images.shape[2]:
            raise DatasetError(f"{name}: images must be [T, S, S, 3], got {self.images.shape}")
        object.__setattr__(self, "state_names", tuple(str(n) for n in self.state_names))
        dims, joints, names = self.states.shape[1], self.actions.shape[1], self.state_names
        if names and len(names) != dims:
            raise DatasetError(f"{name}: {len(names)} state names for {dims} state dims")
        if dims < joints or (dims > joints and not names):
            raise DatasetError(
                f"{name}: state dims {dims} != action dims {joints}; a longer state needs its state_names (the extras)"
            )
        if not (np.isfinite(self.states).all() and np.isfinite(self.actions).all()):
            raise DatasetError(f"{name}: states or actions contain NaN or inf")
        if self.tail is not None:
            tail = self.tail
            if not isinstance(tail, np.ndarray) or tail.dtype != np.float32 or tail.ndim != 2:
                got = f"{tail.dtype} {tail.shape}" if isinstance(tail, np.ndarray) else type(tail).__name__
                raise DatasetError(f"{name}: tail must be float32 [K, J], got {got}")
            if tail.shape[1] != self.actions.shape[1] or not np.isfinite(tail).all():
                raise DatasetError(f"{name}: tail must have {self.actions.shape[1]} finite columns, got {tail.shape}")
        if self.plans is not None:
            plans, joints = self.plans, self.actions.shape[1]
            if not isinstance(plans, np.ndarray) or plans.dtype != np.float32 or plans.ndim != 3:
                got = f"{plans.dtype} {plans.shape}" if isinstance(plans, np.ndarray) else type(plans).__name__
                raise DatasetError(f"{name}: plans must be float32 [T, K, J], got {got}")
            if plans.shape[0] != length or plans.shape[1] < 1 or plans.shape[2] != joints:
                raise DatasetError(f"{name}: plans must be [{length}, K >= 1, {joints}], got {plans.shape}")
            if not np.isfinite(plans).all():
                raise DatasetError(f"{name}: plans contain NaN or inf")

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def num_joints(self) -> int:
        """J: the entries an action has, and the leading state entries they act on."""
        return int(self.actions.shape[1])

    @property
    def state_dims(self) -> int:
        """D: the state's entries, the joints' and the extras'."""
        return int(self.states.shape[1])

    @property
    def joint_states(self) -> np.ndarray:
        """float32 [T, J]: the state's entries the actions act on (the joints)."""
        return self.states[:, : self.num_joints]

    @cached_property
    def labels(self) -> np.ndarray:
        """float32 [T + K, J]: the commanded actions followed by the tail (the chunk labels a sample can use);
        built once, then read by every sample drawn from the episode."""
        return self.actions if self.tail is None else np.concatenate([self.actions, self.tail])

    def chunk_labels(self, horizon: int, hold_still: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(chunks float32 [T, H, J], real bool [T, H]): every frame's H-step chunk label at offset 0: its plan's
        first H targets, or `labels[t : t + H]` padded with the last label, or with zeros when `hold_still`
        (velocity actions) (real False on the padding)."""
        if self.plans is not None:
            return self.plans[:, :horizon], np.ones((len(self), horizon), dtype=bool)
        index = np.arange(len(self))[:, None] + np.arange(horizon)[None, :]
        real = index < len(self.labels)
        chunks = self.labels[np.minimum(index, len(self.labels) - 1)]
        return (np.where(real[..., None], chunks, np.float32(0.0)) if hold_still else chunks), real


def success_rate(episodes: Sequence[Episode]) -> float:
    """Fraction of episodes the expert solved (0.0 for none)."""
    return float(np.mean([e.success for e in episodes])) if episodes else 0.0


def episode_seeds(task: str, count: int, seed: int) -> list[int]:
    """Reset seeds of `count` episodes: distinct per (task, seed), reproducible."""
    rng = np.random.default_rng([seed, zlib.crc32(task.encode())])
    return [int(s) for s in rng.integers(0, 2**31 - 1, size=count)]


def _make_env(task: str, seed: int, image_size: int, settings: SimSettings | None) -> Any:
    try:
        from vlash.sim import TASKS, make_env  # extra: sim
        from vlash.sim.errors import SimConfigError  # extra: sim
    except ImportError as exc:
        raise TrainError(
            f"recording needs the simulation suite vlash.sim ({exc}); install the extra: pip install 'vlash[sim]'"
        ) from exc
    if task not in TASKS:
        raise TrainError(f"unknown task {task!r}; vlash.sim has {list(TASKS)}")
    try:  # task.* settings are checked when the env is built for the task
        return make_env(task, seed=seed, settings=settings, image_size=image_size)
    except SimConfigError as exc:
        raise TrainError(f"simulator settings: {exc}") from None


def _is_success(info: dict[str, Any], terminated: bool) -> bool:
    """The sim's own verdict when it reports one, else "terminated before the time limit"."""
    return bool(info["success"]) if "success" in info else bool(terminated)


def rollout_expert(
    env: Any, seed: int, task: str, tail: int = 0, plan_steps: int = 0, execution: ChunkedExecution | None = None
) -> Episode:
    """One expert episode from `env.reset(seed=seed)` to termination or truncation, plus the expert's plan for
    the `tail` steps after it (`env.expert_chunk` from the final state; the env is not stepped further) and,
    with `plan_steps` > 0, its `plan_steps`-step plan at every frame (`Episode.plans`).

    With `execution`, the expert acts the way a chunk policy runs (`ChunkedExecution`): the commanded actions are
    stale pieces of earlier plans, so the frames show the states a policy's own execution reaches (the target in
    view with the arm not yet turned toward it), while each frame's plan still says what to do from there."""
    obs, info = env.reset(seed=seed)
    instruction, names = str(env.instruction), tuple(getattr(env, "state_names", ()))
    chunks = None if execution is None or execution.per_step else execution.schedule(seed)
    horizon = max(plan_steps, 1 if chunks is None else chunks.plan_steps)
    images, states, actions, plans = [], [], [], []
    terminated = truncated = False
    for _ in range(int(env.max_steps) + 1):
        if chunks is None and plan_steps == 0:
            action = np.asarray(env.expert_action(), dtype=np.float32)
        else:  # a plan's first target is the expert's action (expert_action is expert_chunk(1)[0])
            plan = np.asarray(env.expert_chunk(horizon), dtype=np.float32)
            action = plan[0] if chunks is None else chunks.action(len(actions), plan)
            plans.append(plan[:plan_steps])
        images.append(np.asarray(obs["image"], dtype=np.uint8))
        states.append(np.asarray(obs["state"], dtype=np.float32))
        actions.append(action)
        obs, _reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return Episode(
        task=task,
        instruction=instruction,
        images=np.stack(images),
        states=np.stack(states),
        actions=np.stack(actions),
        seed=seed,
        success=_is_success(info, terminated),
        tail=np.asarray(env.expert_chunk(tail), dtype=np.float32) if tail > 0 else None,
        plans=np.stack(plans) if plan_steps > 0 else None,
        state_names=names,
    )


def record_episodes(
    task: str,
    count: int,
    seed: int,
    image_size: int = 96,
    progress: bool = True,
    only_successful: bool = False,
    tail: int = 0,
    plan_steps: int = 0,
    settings: SimSettings | None = None,
    execution: ChunkedExecution | None = None,
) -> list[Episode]:
    """Record `count` expert episodes of `task` (fewer when `only_successful` drops failed ones), each with a
    `tail` of expert actions past its end and, with `plan_steps` > 0, the expert's plan at every frame
    (`rollout_expert`), in a simulator configured by `settings` (vlash.sim.SimSettings; None: the defaults;
    `image_size` replaces its image size). Actions, tails and plans are in the settings' action interface.
    `execution` runs the expert as a chunk policy runs (vlash.train.chunked_demos); its frames need the plans as
    labels, since the commanded actions are stale.

    Deterministic given (task, count, seed, image_size, settings). Each episode keeps its reset seed and whether
    it succeeded; `success_rate` of the unfiltered list is the expert's success rate.
    """
    if count < 1:
        raise TrainError(f"count must be >= 1, got {count}")
    if execution is not None and not execution.per_step and plan_steps < 1:
        raise TrainError("chunked execution commands stale actions: record the plans (plan_steps > 0) as labels")
    env = _make_env(task, seed, image_size, settings)
    episodes = []
    with progress_bar(f"recording {task}", total=count, enabled=progress) as advance:
        for s in episode_seeds(task, count, seed):
            episodes.append(rollout_expert(env, s, task, tail, plan_steps, execution))
            advance(1, f"success {success_rate(episodes):.0%}")
    close = getattr(env, "close", None)
    if callable(close):
        close()
    return [e for e in episodes if e.success] if only_successful else episodes


def in_task_space(episode: Episode, space: StateActionTransform) -> Episode:
    """The episode as a task-space policy learns it: the joint entries of the states as end-effector positions, the
    extras after them unchanged (as Pi05Processor maps a request's state; state_names keep naming the robot's
    entries); actions, tail and plans as end-effector positions or velocities (each frame's action and plan from
    its joints, the tail from the last joints through the last action); images and seed unchanged (a replay in the
    simulator needs the joint-space original)."""
    states = episode.joint_states
    tail = None
    if episode.tail is not None:
        tail = space.actions_to_model(np.concatenate([episode.actions[-1:], episode.tail]), states[-1])[1:]
    plans = None if episode.plans is None else space.actions_to_model(episode.plans, states)
    extras = episode.states[:, episode.num_joints :]
    return dataclasses.replace(
        episode,
        states=np.concatenate([space.to_model(states), extras], axis=1),
        actions=space.actions_to_model(episode.actions[:, None, :], states)[:, 0, :],
        tail=tail,
        plans=plans,
    )
