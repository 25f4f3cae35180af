"""What the scripted world does not model: a load on the joints, sensor noise, observation latency (all off by default).

- Load (`DisturbanceConfig`): a joint-velocity bias b_j(t) [rad/s] that the arm adds to its joint velocities at
  every substep (vlash.sim.arm). kind "load": per joint a sum of sinusoids with random phases and periods,
  scaled so that its peak over the episode is `scale`; kind "drift": a constant bias of norm `scale` in a
  random direction. A position servo's P term mostly rejects it; integrated velocity commands drift with it.
- `ObservationChannel`: gaussian noise of std `sensor_noise` on every entry of the observed state (the extras of
  vlash.sim.observations too, each in its own units), and observations returned `latency` control steps late (state
  and image together; at reset the buffer holds the reset observation).

Every random draw here comes from generators of its own derived from the episode seed, never from the env's
rng, so the task's world for a seed is the same with and without these features.
"""

from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from vlash.sim.config import ArmConfig, check_int, check_range
from vlash.sim.errors import SimConfigError

DISTURBANCE_KINDS = ("none", "load", "drift")
LOAD_STREAM, NOISE_STREAM = 1, 2  # np.random.default_rng([episode_seed, stream]) for each feature


@dataclass(frozen=True)
class DisturbanceConfig:
    """An unmodelled joint-velocity bias; kind "none" (or scale 0) turns it off."""

    kind: str = "none"  # "none", "load" (slowly varying sinusoids) or "drift" (constant per episode)
    scale: float = 0.0  # load: peak |b_j| over the episode per joint; drift: norm of the bias vector [rad/s]
    period_range: tuple[float, float] = (1.5, 4.0)  # load: each sinusoid's period is drawn from this range [s]
    num_sines: int = 3  # load: sinusoids per joint

    def __post_init__(self) -> None:
        if self.kind not in DISTURBANCE_KINDS:
            raise SimConfigError(
                f"DisturbanceConfig.kind must be one of {', '.join(DISTURBANCE_KINDS)}, got {self.kind!r}"
            )
        if not (isinstance(self.scale, int | float) and math.isfinite(self.scale) and self.scale >= 0):
            raise SimConfigError(f"DisturbanceConfig.scale must be a finite number >= 0, got {self.scale!r}")
        check_range("DisturbanceConfig", "period_range", self.period_range, 1e-3, 1e4)
        check_int("DisturbanceConfig", "num_sines", self.num_sines, 1)

    @property
    def active(self) -> bool:
        return self.kind != "none" and self.scale > 0


@dataclass(frozen=True)
class JointBias:
    """One episode's bias: b_j(t) = offset_j + sum_k amplitude_jk * sin(2 pi t / period_jk + phase_jk)."""

    offset: np.ndarray  # [J] constant part [rad/s]
    amplitude: np.ndarray  # [J, K] [rad/s]
    period: np.ndarray  # [J, K] [s]
    phase: np.ndarray  # [J, K] [rad]

    @classmethod
    def sample(
        cls, config: DisturbanceConfig, rng: np.random.Generator, num_joints: int, horizon_s: float
    ) -> JointBias:
        """Draw an episode's bias; a load's peak over [0, horizon_s] is `config.scale` for each joint."""
        if config.kind == "drift":
            direction = rng.normal(size=num_joints)
            offset = config.scale * direction / max(float(np.linalg.norm(direction)), 1e-12)
            empty = np.zeros((num_joints, 0))
            return cls(offset, empty, empty.copy(), empty.copy())
        shape = (num_joints, config.num_sines)
        period = rng.uniform(*config.period_range, size=shape)
        phase = rng.uniform(-math.pi, math.pi, size=shape)
        weight = rng.uniform(0.5, 1.0, size=shape)  # no sinusoid negligible
        unit = cls(np.zeros(num_joints), weight, period, phase)
        grid = np.linspace(0.0, horizon_s, max(2, int(horizon_s * 200)))
        peak = np.abs(unit.at(grid)).max(axis=0)  # [J]
        return cls(np.zeros(num_joints), weight * (config.scale / np.maximum(peak, 1e-12))[:, None], period, phase)

    def at(self, t: np.ndarray) -> np.ndarray:
        """Bias [..., J] at times t [...] in seconds."""
        t = np.asarray(t, dtype=np.float64)[..., None, None]
        waves = self.amplitude * np.sin(2 * math.pi * t / self.period + self.phase)
        return self.offset + waves.sum(axis=-1)

    def substeps(self, step: int, control_dt: float, substeps: int) -> list[list[float]]:
        """bias[joint][j] during substep j of control step `step` (evaluated at the substep's start)."""
        t = (step + np.arange(substeps) / substeps) * control_dt
        return self.at(t).T.tolist()


class ObservationChannel:
    """Adds sensor noise to observed states and delays observations by `latency` control steps."""

    def __init__(self, latency: int, noise_std: float, state_low: np.ndarray, state_high: np.ndarray) -> None:
        self.latency, self.noise_std = latency, noise_std
        self._low, self._high = state_low, state_high
        self._buffer: deque[dict] = deque(maxlen=latency + 1)
        self._rng: np.random.Generator | None = None

    def reset(self, episode_seed: int | None) -> None:
        self._buffer.clear()
        self._rng = np.random.default_rng([episode_seed, NOISE_STREAM]) if self.noise_std > 0 else None

    def push(self, observation: dict) -> dict:
        """Record the observation captured now; return the one to show (captured `latency` steps ago)."""
        if self._rng is not None:
            noisy = observation["state"] + self._rng.normal(0.0, self.noise_std, observation["state"].shape)
            observation = {**observation, "state": np.clip(noisy, self._low, self._high).astype(np.float32)}
        if not self._buffer:  # at reset the whole buffer holds the reset observation
            self._buffer.extend([observation] * self.latency)
        self._buffer.append(observation)
        return self.shown()  # a copy: a buffered observation may be shown again

    @property
    def has_shown(self) -> bool:
        return bool(self._buffer)

    def shown(self) -> dict:
        """The observation the last push returned (a copy)."""
        return {key: value.copy() for key, value in self._buffer[0].items()}

    def state(self) -> tuple:
        """Picklable copy of the buffer and the noise rng (for snapshots)."""
        rng = None if self._rng is None else copy.deepcopy(self._rng.bit_generator.state)
        return list(self._buffer), rng

    def restore(self, state: tuple) -> None:
        buffer, rng = state
        self._buffer.clear()
        self._buffer.extend(buffer)
        if rng is not None:
            self._rng = self._rng or np.random.default_rng()
            self._rng.bit_generator.state = copy.deepcopy(rng)


class Unmodelled:
    """One env's load, sensor noise and observation latency; with all off it draws nothing and changes nothing."""

    def __init__(
        self,
        disturbance: DisturbanceConfig,
        sensor_noise: float,
        latency: int,
        arm: ArmConfig,
        horizon_s: float,
        state_bounds: tuple[np.ndarray, np.ndarray],
    ) -> None:
        self.disturbance, self.arm, self.horizon_s = disturbance, arm, horizon_s
        self.randomized = disturbance.active or sensor_noise > 0  # needs an episode seed
        self.load: JointBias | None = None
        self.channel = None
        if sensor_noise > 0 or latency > 0:
            self.channel = ObservationChannel(latency, sensor_noise, *state_bounds)

    def reset(self, episode_seed: int | None) -> None:
        self.load = None
        if self.disturbance.active:
            rng = np.random.default_rng([episode_seed, LOAD_STREAM])
            self.load = JointBias.sample(self.disturbance, rng, self.arm.num_joints, self.horizon_s)
        if self.channel is not None:
            self.channel.reset(episode_seed)

    def bias(self, step: int) -> list[list[float]] | None:
        """The load's bias[joint][substep] during control step `step` (None: no load)."""
        return None if self.load is None else self.load.substeps(step, self.arm.control_dt, self.arm.substeps)

    def bias_at(self, step: int) -> np.ndarray | None:
        """The load's bias [J] at the start of control step `step` (None: no load)."""
        return None if self.load is None else self.load.at(step * self.arm.control_dt)

    def observe(self, observation: dict, record: bool = True) -> dict:
        """The observation to return for the one captured now (record=False: the last one returned, unchanged)."""
        if self.channel is None:
            return observation
        return self.channel.shown() if not record and self.channel.has_shown else self.channel.push(observation)

    def snapshot(self) -> tuple:
        return self.load, None if self.channel is None else copy.deepcopy(self.channel.state())

    def restore(self, snapshot: tuple) -> None:
        self.load, channel = snapshot
        if self.channel is not None and channel is not None:
            self.channel.restore(copy.deepcopy(channel))
