"""Expert demonstrations executed the way a chunk policy runs them (`ChunkedExecution`).

An expert that replans every control step never shows the states a chunk policy reaches: a policy runs each
chunk open loop for `s` steps, and under a delay `d` its new chunk starts only `d` steps after the frame it was
planned from. On `intercept` the expert turns toward the target one frame after it appears, in every one of 2,000
recorded episodes; a policy trained on those frames met "target in view, arm still at rest" for several steps in
closed loop and answered ~0 (docs/history/EVALUATION-LOG.md, "Observable velocity tasks"). Recorded with
`ChunkedExecution`, the frames come from stale chunks, and each frame is labelled with the plan the expert makes
there (`Episode.plans`): what to do from the state the policy's own execution reached. This is the imitation
learning remedy for covariate shift that needs no queries of a learner (DART's idea: perturb the expert's
execution the way the learner will be perturbed, and keep the expert's labels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vlash.train.errors import TrainError

DELAY_STREAM = 0x5EED  # the delay's random stream beside the episode seed (the reset uses the seed itself)


@dataclass(frozen=True)
class ChunkedExecution:
    """The expert run as a chunk policy runs (naive asynchronous execution): at frames 0, s, 2s, ... it plans a
    chunk from what it sees there; each chunk's actions take over `delay` steps after the frame it was planned at,
    the previous chunk running meanwhile (the first chunk runs from frame 0). Each episode draws its delay from
    U{0..delay_max}, seeded by its reset seed. `execute_steps` 1 with `delay_max` 0 is the expert replanning every
    step."""

    execute_steps: int = 1  # s, the actions a chunk runs before the next one takes over, >= 1
    delay_max: int = 0  # the largest delay, 0 <= delay_max < execute_steps

    def __post_init__(self) -> None:
        s, d = self.execute_steps, self.delay_max
        if not (isinstance(s, int) and s >= 1):
            raise TrainError(f"execute_steps must be an int >= 1, got {s!r}")
        if not (isinstance(d, int) and 0 <= d < s):
            raise TrainError(f"delay_max must be an int in [0, {s}) (below execute_steps), got {d!r}")

    @property
    def per_step(self) -> bool:
        """Whether this is the expert replanning every step (the frames a plain recording has)."""
        return self.execute_steps == 1 and self.delay_max == 0

    def describe(self) -> str:
        """How the expert ran, in words for an error message."""
        if self.per_step:
            return "replanning every step"
        return f"in chunks of {self.execute_steps} steps after delays of 0..{self.delay_max}"

    def to_dict(self) -> dict[str, int]:
        return {"execute_steps": self.execute_steps, "delay_max": self.delay_max}

    def schedule(self, seed: int) -> ChunkSchedule:
        """One episode's schedule, its delay drawn from the episode's reset seed."""
        delay = int(np.random.default_rng([int(seed), DELAY_STREAM]).integers(0, self.delay_max + 1))
        return ChunkSchedule(self.execute_steps, delay)


class ChunkSchedule:
    """Which plan's action runs at each frame of one episode: `action(t, plan)` is called once per frame, in order,
    with the expert's plan made at `t` (at least `plan_steps` actions)."""

    def __init__(self, execute_steps: int, delay: int) -> None:
        self.execute_steps, self.delay = execute_steps, delay
        self._running: tuple[int, np.ndarray] | None = None  # (frame it was planned at, its actions)
        self._pending: tuple[int, np.ndarray] | None = None

    @property
    def plan_steps(self) -> int:
        """The actions of a plan the schedule may run: a chunk runs until `delay` steps after the next request."""
        return self.execute_steps + self.delay

    def action(self, t: int, plan: Any) -> np.ndarray:
        """The action commanded at frame `t`, given the expert's plan made at `t`."""
        if t % self.execute_steps == 0:
            self._pending = (t, np.asarray(plan))
        pending = self._pending
        if pending is not None and (self._running is None or t >= pending[0] + self.delay):
            self._running, self._pending = pending, None
        if self._running is None:
            raise TrainError(f"a schedule starts at frame 0, got frame {t}")
        start, chunk = self._running
        if t - start >= len(chunk):
            raise TrainError(f"plan of {len(chunk)} actions is too short for frame {t - start} of its chunk")
        return chunk[t - start]
