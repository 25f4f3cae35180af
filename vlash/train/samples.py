"""Training samples with the two latency augmentations (pure numpy).

Future-state offset (VLASH; docs/METHODS.md "vlash: future-state conditioning"): `delta ~ U{0..d_max}`; the
image stays the one observed at `t`, the state becomes the state the robot will be in at `t + delta` — for
`delta > 0` the action commanded at `t + delta - 1` (what the runtime sends: the last target commanded before
the switch), for `delta = 0` the observed state at `t` — and the targets are `labels[t + delta : t + delta +
H]`, the episode's actions followed by its expert tail (`Episode.labels`). Positions past the labels' end
repeat the last one and are masked out (`action_mask` False); `delta` is clamped so that the state is a
recorded one.

Committed prefix (training-time RTC, FASTER's mix; docs/METHODS.md "prefix" and "faster"): with probability
`mix_prob` a sample is a hand-off sample: `d ~ U{0..d_max}` (clamped so at least one non-prefix real target remains),
the first `d` targets are given clean (per-token time 0) and left out of the loss, and with probability
`has_prob` its per-token times follow the horizon-aware schedule; other samples are plain (d = 0,
constant time; `vlash.train.flow` draws the times). Why not every sample: clean prefix actions and the
clean early tokens of horizon-aware rows let a model from scratch predict the chunk from the actions
alone. With every sample mixed (plain share 1/18) a pi05-tiny trained for 1500 steps ignored image and
prompt entirely (shuffling them within the batch did not change its loss); plain samples keep the
observation the only source of the chunk.

Plan labels (episodes with `Episode.plans`): the targets are `plans[t][delta : delta + H]`, the plan the
expert made at `t` with what it could see at `t`, and the future state is that plan's `plans[t][delta - 1]`;
nothing is padded and `delta` is not clamped (the plan runs past the episode's end). The commanded actions
after `t` would carry moves toward targets that appear after `t` (on `whack`, within nearly every chunk),
which the image at `t` cannot show.

Prefix from the executed actions (`SampleSpec.prefix_source = "executed"`, with plan labels): the committed prefix is
`labels[t + delta : t + delta + d]`, what the demonstration executed then (recorded as a chunk policy runs, the rows
of an earlier plan), and the targets after it stay the plan at `t`: at run time the prefix is the running chunk's
rows, planned before the observation the request carries.

Velocity actions (`SampleSpec.velocity_dt`: labels are joint velocities in rad/s, the state joint positions): the
future state is what the robot's executor sends (robot_io.executors.ChunkRecord.future_state), the state at `t`
plus dt times the sum of the velocities committed in between, `labels[t : t + delta]` (with plans `plans[t][:delta]`),
not the recorded state at `t + delta` (that one holds the unmodelled load's drift, which the executor cannot know).
Labels past the end are zero velocity (holding still), masked like the repeated last target of absolute actions.

A state with extras after the joints (`Episode.state_names`: joint velocities, the target) keeps them as observed
at `t` in the future state, as the executor sends them: only the joints can be rolled forward by the actions.

Baseline (`SampleSpec.baseline`): delta = 0, d = 0, constant times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vlash.train.episodes import Episode
from vlash.train.errors import ConfigError

PREFIX_SOURCES = ("plan", "executed")


@dataclass(frozen=True)
class SampleSpec:
    """How training samples are drawn."""

    horizon: int = 50  # H, actions per chunk (the policy's action_horizon)
    d_max: int = 8  # largest future-state offset and committed prefix length, 0 <= d_max < horizon
    future_state: bool = True  # draw delta ~ U{0..d_max} (False: delta = 0)
    prefix_mix: bool = True  # draw a committed prefix d ~ U{0..d_max} and mix in horizon-aware times
    mix_prob: float = 0.5  # share of hand-off samples (prefix + maybe horizon-aware) with prefix_mix, in [0, 1]
    has_prob: float = 0.5  # probability of horizon-aware per-token times in a hand-off sample, in [0, 1]
    # share of draws taken from frames whose chunk label moves (FrameTable.moving_frames), in [0, 1]; the rest are
    # drawn as usual. On whack ~3/4 of the frames hold still on a touched target: their labels need no image
    moving_share: float = 0.0
    # None: labels are absolute joint targets. Else they are joint velocities [rad/s] run for this control period
    # [s] each: the future state integrates them and labels past the end are zero (hold still)
    velocity_dt: float | None = None
    # where a hand-off sample's committed prefix comes from: "plan", the first d rows of its own targets, or
    # "executed", the actions the demonstration went on to execute (what a robot commits at run time: the rows of the
    # chunk still running, planned earlier). The same without plan labels (the targets are the executed actions)
    prefix_source: str = "plan"

    def __post_init__(self) -> None:
        if not isinstance(self.horizon, int) or self.horizon < 1:
            raise ConfigError(f"horizon must be an int >= 1, got {self.horizon!r}")
        if not isinstance(self.d_max, int) or not 0 <= self.d_max < self.horizon:
            raise ConfigError(f"d_max must be an int in [0, horizon={self.horizon}), got {self.d_max!r}")
        for name in ("mix_prob", "has_prob", "moving_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        if self.prefix_source not in PREFIX_SOURCES:
            raise ConfigError(f"prefix_source must be one of {PREFIX_SOURCES}, got {self.prefix_source!r}")
        dt = self.velocity_dt
        if dt is not None and not (isinstance(dt, int | float) and math.isfinite(dt) and dt > 0):
            raise ConfigError(f"velocity_dt must be None or a finite number > 0, got {dt!r}")

    @classmethod
    def baseline(cls, horizon: int = 50, velocity_dt: float | None = None) -> SampleSpec:
        """No augmentation: delta = 0, no prefix, constant times."""
        return cls(
            horizon=horizon,
            d_max=0,
            future_state=False,
            prefix_mix=False,
            mix_prob=0.0,
            has_prob=0.0,
            velocity_dt=velocity_dt,
        )


@dataclass(frozen=True)
class Sample:
    """One training example built from frame `t` of an episode."""

    image: np.ndarray  # uint8 [S, S, 3] camera frame observed at t
    state: np.ndarray  # float32 [D] state given to the policy (future state at t + delta; extras as at t)
    instruction: str  # task instruction
    targets: np.ndarray  # float32 [H, J] labels[t + delta :], padded with the last label (velocities: zeros)
    action_mask: np.ndarray  # bool [H] True where the target is a real label (not end padding)
    prefix_len: int  # d, committed clean actions at the chunk's start (no loss there)
    delta: int  # future-state offset
    frame: int  # t
    use_has: bool  # per-token times from the horizon-aware schedule (else constant)

    @property
    def loss_mask(self) -> np.ndarray:
        """bool [H]: real targets after the committed prefix."""
        return self.action_mask & (np.arange(len(self.action_mask)) >= self.prefix_len)


def build_sample(episode: Episode, t: int, spec: SampleSpec, rng: np.random.Generator) -> Sample:
    """The sample of frame `t` of `episode`, offsets drawn from `rng` as `spec` says."""
    length = len(episode)
    if not 0 <= t < length:
        raise IndexError(f"frame {t} outside the episode's {length} frames")
    delta = int(rng.integers(0, spec.d_max + 1)) if spec.future_state else 0
    if episode.plans is not None:
        state, targets, action_mask = _from_plan(episode, t, delta, spec)
    else:
        delta = min(delta, length - 1 - t)
        start = t + delta
        labels = episode.labels
        state = future_state(episode.states[t], labels[t:start], spec.velocity_dt)
        targets, action_mask = padded_labels(labels, np.arange(start, start + spec.horizon), spec.velocity_dt)
    handoff = bool(spec.prefix_mix and rng.random() < spec.mix_prob)
    prefix_len = min(int(rng.integers(0, spec.d_max + 1)), int(action_mask.sum()) - 1) if handoff else 0
    use_has = bool(handoff and rng.random() < spec.has_prob)
    if prefix_len and spec.prefix_source == "executed" and episode.plans is not None:
        executed, _ = padded_labels(episode.labels, np.arange(t + delta, t + delta + prefix_len), spec.velocity_dt)
        targets = np.concatenate([executed, targets[prefix_len:]])
    return Sample(
        image=episode.images[t],
        state=np.array(state, dtype=np.float32),
        instruction=episode.instruction,
        targets=targets.astype(np.float32),
        action_mask=action_mask,
        prefix_len=prefix_len,
        delta=delta,
        frame=t,
        use_has=use_has,
    )


def future_state(state: np.ndarray, committed: np.ndarray, velocity_dt: float | None) -> np.ndarray:
    """The state the robot's executor sends after the `committed` actions [delta, J] ran from `state` [D]: in its
    first J entries (the joints) the last of them (absolute targets; `state` when there are none), or
    `state + velocity_dt * sum(committed)` (velocities, summed as ChunkRecord.future_state does); the entries after
    them (the extras) as in `state`."""
    joints = committed.shape[1]
    out = np.array(state, dtype=np.float32)
    if velocity_dt is not None:
        rolled = velocity_dt * committed.sum(axis=0, dtype=np.float64)
        out[:joints] = (np.asarray(state[:joints], np.float64) + rolled).astype(np.float32)
    elif len(committed):
        out[:joints] = committed[-1]
    return out


def padded_labels(labels: np.ndarray, index: np.ndarray, velocity_dt: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(labels at `index` [H, J], real bool [H]): past the labels' end the last label (absolute targets: stay there)
    or zero (velocities: hold still), real False there."""
    real = index < len(labels)
    targets = labels[np.minimum(index, len(labels) - 1)]
    if velocity_dt is not None:
        targets = np.where(real[:, None], targets, np.zeros_like(targets))
    return targets, real


def _from_plan(episode: Episode, t: int, delta: int, spec: SampleSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(state, targets [H, J], action mask [H]) of frame `t` at offset `delta` from the expert's plan at `t`."""
    plan = episode.plans[t]
    if len(plan) < spec.d_max + spec.horizon:
        raise ConfigError(
            f"episode {episode.task!r} seed {episode.seed}: its plans hold {len(plan)} steps, fewer than "
            f"d_max + horizon = {spec.d_max + spec.horizon}; record them with plan_steps >= that"
        )
    state = future_state(episode.states[t], plan[:delta], spec.velocity_dt)
    return state, plan[delta : delta + spec.horizon], np.ones(spec.horizon, dtype=bool)


def _moving(episode: Episode, horizon: int, velocity_dt: float | None = None) -> np.ndarray:
    """bool [T]: whether frame t's H-step chunk label moves more than MOVING_MIN (see FrameTable.moving_frames);
    a velocity label moves the joints by dt times its running sum."""
    chunks, _ = episode.chunk_labels(horizon, hold_still=velocity_dt is not None)
    if velocity_dt is not None:
        return np.abs(velocity_dt * np.cumsum(chunks, axis=1)).max(axis=(1, 2)) > MOVING_MIN
    return np.abs(chunks - chunks[:, :1]).max(axis=(1, 2)) > MOVING_MIN


@dataclass(frozen=True)
class SampleBatch:
    """B samples stacked; images are referenced by their global frame index (see `FrameTable`)."""

    frames: np.ndarray  # int64 [B] global frame index (row of the FrameTable)
    states: np.ndarray  # float32 [B, D]
    instructions: list[str]  # [B]
    targets: np.ndarray  # float32 [B, H, J]
    action_mask: np.ndarray  # bool [B, H]
    prefix_len: np.ndarray  # int64 [B]
    delta: np.ndarray  # int64 [B]
    use_has: np.ndarray  # bool [B]

    @property
    def loss_mask(self) -> np.ndarray:
        """bool [B, H]: real targets after each sample's committed prefix."""
        index = np.arange(self.action_mask.shape[1])
        return self.action_mask & (index[None, :] >= self.prefix_len[:, None])


MOVING_MIN = 0.05  # a chunk label "moves" when some target is this far from its first (rad or world units)


class FrameTable:
    """(episode, t) of every frame of a list of episodes, in concatenation order, for drawing samples.

    With `balance_tasks` a draw picks a task uniformly, then a frame uniformly among that task's frames
    (episode lengths differ a lot between tasks: a reach episode ends when touched, whack runs 240 steps);
    otherwise frames are drawn uniformly. With `SampleSpec.moving_share` > 0, that share of the draws is
    replaced by frames drawn uniformly among the moving ones (`moving_frames`).
    """

    def __init__(self, episodes: Sequence[Episode], balance_tasks: bool = True) -> None:
        if not episodes:
            raise ConfigError("need at least one episode to draw samples from")
        lengths = np.array([len(e) for e in episodes], dtype=np.int64)
        self.episodes = list(episodes)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])  # global index of each episode's frame 0
        self.episode_of = np.repeat(np.arange(len(episodes)), lengths)  # [N]
        self.t_of = np.arange(int(lengths.sum())) - np.repeat(self.offsets, lengths)  # [N]
        tasks = np.array([e.task for e in episodes])[self.episode_of]
        self.task_frames = [np.flatnonzero(tasks == task) for task in sorted(set(tasks))] if balance_tasks else []
        self._moving: dict[tuple[int, float | None], np.ndarray] = {}

    def draw_frames(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """Global frame indices [count]: task-balanced or uniform (with replacement)."""
        if not self.task_frames:
            return rng.integers(0, len(self), size=count)
        task = rng.integers(0, len(self.task_frames), size=count)
        return np.array([self.task_frames[k][rng.integers(0, len(self.task_frames[k]))] for k in task])

    def __len__(self) -> int:
        return len(self.episode_of)

    def moving_frames(self, horizon: int, velocity_dt: float | None = None) -> np.ndarray:
        """Global indices of the frames whose H-step chunk label (plan, or actions and tail) has a target more
        than MOVING_MIN from its first one in some dimension (velocities: moves a joint that far)."""
        key = (horizon, velocity_dt)
        if key not in self._moving:
            moving = [_moving(e, horizon, velocity_dt) for e in self.episodes]
            self._moving[key] = np.flatnonzero(np.concatenate(moving))
        return self._moving[key]

    def draw(self, batch_size: int, spec: SampleSpec, rng: np.random.Generator) -> SampleBatch:
        """`batch_size` samples of frames drawn with `draw_frames`, `spec.moving_share` of them moving frames."""
        frames = self.draw_frames(batch_size, rng)
        if spec.moving_share > 0:
            moving = self.moving_frames(spec.horizon, spec.velocity_dt)
            if len(moving) == 0:
                raise ConfigError(f"moving_share {spec.moving_share} but no frame's chunk label moves")
            swap = rng.random(batch_size) < spec.moving_share
            frames[swap] = moving[rng.integers(0, len(moving), size=int(swap.sum()))]
        samples = [build_sample(self.episodes[self.episode_of[f]], int(self.t_of[f]), spec, rng) for f in frames]
        return SampleBatch(
            frames=frames.astype(np.int64),
            states=np.stack([s.state for s in samples]),
            instructions=[s.instruction for s in samples],
            targets=np.stack([s.targets for s in samples]),
            action_mask=np.stack([s.action_mask for s in samples]),
            prefix_len=np.array([s.prefix_len for s in samples], dtype=np.int64),
            delta=np.array([s.delta for s in samples], dtype=np.int64),
            use_has=np.array([s.use_has for s in samples], dtype=bool),
        )
