"""track: keep the end effector on a target that moves along a smooth random path.

The path is polar around the base: radius and angle are each a constant plus a sum of random
sinusoids, checked at reset to stay reachable and within the expert's joint speed/acceleration
budget. The expert knows the whole path (privileged) and tracks it with velocity feed-forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vlash import planar_arm as kinematics
from vlash.sim.config import check_int, check_positive, check_range
from vlash.sim.errors import SimConfigError
from vlash.sim.tasks.base import COLORS, DrawItem, Event, Goal, Task


@dataclass(frozen=True)
class TrackConfig:
    """Episode parameters of `track`."""

    max_steps: int = 180  # episode length (6 s at 30 Hz); track always runs to max_steps
    settle_steps: int = 45  # errors before this step are not scored (time to reach the path)
    error_threshold: float = 0.05  # success: mean end-effector error after settling below this (world units)
    target_radius: float = 0.06  # drawn radius of the target
    radius_center: float = 0.575  # mean distance of the path from the base
    radius_amplitude: float = 0.2  # total amplitude of the radial sinusoids
    angle_amplitude: tuple[float, float] = (0.6, 1.3)  # total amplitude of the angular sinusoids [rad]
    frequencies: tuple[float, float] = (0.8, 2.2)  # angular frequencies of the sinusoids [rad/s]
    num_sines: int = 2  # sinusoids per coordinate
    start_offset: float = 1.2  # path's mean angle within this of the arm's angle at reset [rad]
    speed_fraction: float = 0.75  # joint speed of the path <= this * the expert's velocity limit
    max_tries: int = 100  # rejection-sampling attempts for a feasible path

    def __post_init__(self) -> None:
        check_int("TrackConfig", "max_steps", self.max_steps, 2)
        check_int("TrackConfig", "settle_steps", self.settle_steps, 0)
        if self.settle_steps >= self.max_steps:
            raise SimConfigError(f"TrackConfig.settle_steps {self.settle_steps} must be < max_steps {self.max_steps}")
        for name in ("error_threshold", "target_radius", "radius_center", "speed_fraction", "start_offset"):
            check_positive("TrackConfig", name, getattr(self, name))
        if not 0 <= self.radius_amplitude < self.radius_center:
            raise SimConfigError(
                f"TrackConfig.radius_amplitude must be in [0, radius_center), got {self.radius_amplitude}"
            )
        check_range("TrackConfig", "angle_amplitude", self.angle_amplitude, 0.0, math.pi)
        check_range("TrackConfig", "frequencies", self.frequencies, 0.0, 20.0)
        check_int("TrackConfig", "num_sines", self.num_sines, 1)
        check_int("TrackConfig", "max_tries", self.max_tries, 1)


@dataclass
class TrackWorld:
    radius: np.ndarray  # [1 + 3K]: centre, then K amplitudes, frequencies, phases
    angle: np.ndarray  # same layout for the angle
    color: str
    instruction: str
    error_sum: float = 0.0  # sum of scored end-effector errors
    error_count: int = 0  # number of scored steps


def _sines(params: np.ndarray, t: np.ndarray) -> np.ndarray:
    k = (params.size - 1) // 3
    amp, freq, phase = params[1 : 1 + k], params[1 + k : 1 + 2 * k], params[1 + 2 * k :]
    return params[0] + np.sum(amp * np.sin(np.multiply.outer(t, freq) + phase), axis=-1)


def _sines_at(params: list[float], t: float) -> float:
    k = (len(params) - 1) // 3
    terms = zip(params[1 : 1 + k], params[1 + k : 1 + 2 * k], params[1 + 2 * k :], strict=True)
    return params[0] + sum(amp * math.sin(freq * t + phase) for amp, freq, phase in terms)


def _sines_rate(params: list[float], t: float) -> float:
    """d/dt of _sines_at(params, t)."""
    k = (len(params) - 1) // 3
    terms = zip(params[1 : 1 + k], params[1 + k : 1 + 2 * k], params[1 + 2 * k :], strict=True)
    return sum(amp * freq * math.cos(freq * t + phase) for amp, freq, phase in terms)


class TrackTask(Task):
    """Success: mean end-effector error over steps >= settle_steps below error_threshold."""

    name = "track"
    config_type = TrackConfig
    templates = ("follow the moving {color} target", "track the {color} dot", "keep the arm on the {color} dot")

    def position(self, world: TrackWorld, step: np.ndarray | int) -> np.ndarray:
        """Target centre at control step(s) `step`: [2] or [..., 2]."""
        if isinstance(step, int | np.integer):
            t = int(step) * self.arm.control_dt
            r, a = _sines_at(world.radius.tolist(), t), _sines_at(world.angle.tolist(), t)
            return np.array([r * math.cos(a), r * math.sin(a)])
        t = np.asarray(step, dtype=np.float64) * self.arm.control_dt
        r, a = _sines(world.radius, t), _sines(world.angle, t)
        return np.stack([r * np.cos(a), r * np.sin(a)], axis=-1)

    def sample(self, rng: np.random.Generator, q_init: np.ndarray) -> TrackWorld:
        cfg = self.config
        ee_angle = math.atan2(*kinematics.forward(q_init, self.links)[::-1])
        color = list(COLORS)[int(rng.integers(len(COLORS)))]
        for _ in range(cfg.max_tries):
            world = TrackWorld(
                radius=self._params(rng, cfg.radius_center, cfg.radius_amplitude),
                angle=self._params(
                    rng, ee_angle + rng.uniform(-1, 1) * cfg.start_offset, rng.uniform(*cfg.angle_amplitude)
                ),
                color=color,
                instruction="",
            )
            if self._feasible(world, q_init):
                world.instruction = self.instruction(rng, color)
                return world
        raise SimConfigError(f"track: no feasible path in {cfg.max_tries} tries; relax TrackConfig")

    def _params(self, rng: np.random.Generator, center: float, total_amplitude: float) -> np.ndarray:
        k = self.config.num_sines
        weights = rng.dirichlet(np.ones(k))
        freq = rng.uniform(*self.config.frequencies, size=k)
        return np.concatenate([[center], total_amplitude * weights, freq, rng.uniform(-math.pi, math.pi, size=k)])

    def _feasible(self, world: TrackWorld, q_init: np.ndarray) -> bool:
        steps = np.arange(self.config.max_steps + 60)
        q = self._path_joints(world, steps, q_init)
        speed = np.abs(np.diff(q, axis=0)) / self.arm.control_dt
        accel = np.abs(np.diff(q, n=2, axis=0)) / self.arm.control_dt**2
        lim = self.limits
        return bool(speed.max() <= self.config.speed_fraction * lim.velocity and accel.max() <= 0.6 * lim.acceleration)

    def _path_joints(self, world: TrackWorld, steps: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
        """IK along the path on q_ref's elbow branch, joint 0 unwrapped to be continuous."""
        q = self.ik(self.position(world, steps), np.broadcast_to(q_ref, (steps.size, 2)))
        q[:, 0] = np.unwrap(q[:, 0])
        return q

    def initial_events(self, world: TrackWorld) -> list[Event]:
        return [{"kind": "appear", "step": 0, "id": 0, "xy": self.position(world, 0).tolist(), "color": world.color}]

    def update(self, world: TrackWorld, step: int, ee_xy: np.ndarray) -> list[Event]:
        if step >= self.config.settle_steps:
            world.error_sum += float(np.hypot(*(ee_xy - self.position(world, step))))
            world.error_count += 1
        return []

    def mean_error(self, world: TrackWorld) -> float | None:
        return world.error_sum / world.error_count if world.error_count else None

    def success(self, world: TrackWorld) -> bool:
        error = self.mean_error(world)
        return error is not None and error < self.config.error_threshold

    def metrics(self, world: TrackWorld) -> dict[str, float | None]:
        return {"mean_error": self.mean_error(world)}

    def target_xy(self, world: TrackWorld, step: int) -> np.ndarray:
        return self.position(world, step)

    def target_velocity(self, world: TrackWorld, step: int) -> np.ndarray:
        """The path's velocity at control step `step` (analytic: the polar sinusoids differentiated)."""
        t = int(step) * self.arm.control_dt
        radius, angle = world.radius.tolist(), world.angle.tolist()
        r, a = _sines_at(radius, t), _sines_at(angle, t)
        dr, da = _sines_rate(radius, t), _sines_rate(angle, t)
        return np.array([dr * math.cos(a) - r * da * math.sin(a), dr * math.sin(a) + r * da * math.cos(a)])

    def draw_items(self, world: TrackWorld, step: int) -> list[DrawItem]:
        return [DrawItem(self.position(world, step), self.config.target_radius, COLORS[world.color])]

    def expert_goal(self, world: TrackWorld, visible_step: int, step: int, c: np.ndarray, v: np.ndarray) -> Goal:
        now, nxt = self.position(world, step), self.position(world, step + 1)
        q_now = self.ik(now, c)
        return q_now, (self.ik(nxt, q_now) - q_now) / self.arm.control_dt
