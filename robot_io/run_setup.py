"""What a run is (RunConfig) and the setup checks that refuse a robot the policy cannot drive (fit_policy), before
any command: state and action sizes, cameras (the camera map), and what vlash mode and max_step need to know."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from robot_io.camera_map import resolve_camera_map
from robot_io.executors import ExecutorConfig
from robot_io.protocol import Metadata
from robot_io.protocol.errors import ShapeError
from robot_io.robots.base import Robot, action_dim, action_state_index, robot_cameras, state_dim
from robot_io.safety import FALLBACKS, Fallback, SafetyConfig


@dataclass(frozen=True)
class RunConfig:
    """What to run and for how long."""

    executor: ExecutorConfig = field(default_factory=ExecutorConfig)  # mode, s, q, d0
    rate_hz: float = 30.0  # control rate [Hz]
    duration_s: float = 20.0  # run length [s] (schedule time)
    on_missing: Fallback = "hold"  # watchdog fallback: hold the last command, or stop where measured
    max_step: float | None = None  # largest joint change per tick; None: no limit
    status_every_s: float = 0.25  # how often the status callback is called
    # policy camera -> robot camera, None: left out on purpose (masked); cameras named alike need no entry
    camera_map: dict[str, str | None] = field(default_factory=dict)
    stall_timeout_s: float | None = None  # no tick done this long: the stall watchdog holds; None: max(0.25, 4 periods)
    trace_ticks: int = 18_000  # the most recent ticks RunResult keeps (10 min at 30 Hz); 0: none (a TraceSink has all)
    stats_window: int = 10_000  # the most recent chunks the summary's latency percentiles cover
    server_wait_s: float = 120.0  # how long to wait for the policy server's first reply (one still loading) [s]

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ValueError(f"RunConfig.rate_hz must be > 0, got {self.rate_hz}")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ValueError(f"RunConfig.duration_s must be > 0, got {self.duration_s}")
        if self.duration_s * self.rate_hz < 0.5:  # the loop runs round(duration * rate) ticks
            raise ValueError(f"RunConfig.duration_s {self.duration_s} s is shorter than one control period at "
                             f"{self.rate_hz:g} Hz: no tick would run")  # fmt: skip
        if self.on_missing not in FALLBACKS:
            raise ValueError(f"RunConfig.on_missing must be one of {FALLBACKS}, got {self.on_missing!r}")
        if self.max_step is not None and not (math.isfinite(self.max_step) and self.max_step > 0):
            raise ValueError(f"RunConfig.max_step must be > 0 or None, got {self.max_step}")
        if not (isinstance(self.trace_ticks, int) and self.trace_ticks >= 0):
            raise ValueError(f"RunConfig.trace_ticks must be an int >= 0, got {self.trace_ticks!r}")
        if not (isinstance(self.stats_window, int) and self.stats_window >= 1):
            raise ValueError(f"RunConfig.stats_window must be an int >= 1, got {self.stats_window!r}")
        if self.stall_timeout_s is not None and not (
            math.isfinite(self.stall_timeout_s) and self.stall_timeout_s > 2 / self.rate_hz
        ):
            raise ValueError(f"RunConfig.stall_timeout_s must exceed two control periods ({2 / self.rate_hz:.3f} "
                             f"s), got {self.stall_timeout_s}")  # fmt: skip
        if not (math.isfinite(self.server_wait_s) and self.server_wait_s > 0):
            raise ValueError(f"RunConfig.server_wait_s must be > 0, got {self.server_wait_s}")
        if not self.status_every_s > 0:
            raise ValueError(f"RunConfig.status_every_s must be > 0, got {self.status_every_s}")

    @property
    def stall_timeout(self) -> float:
        """The stall watchdog's bound in seconds."""
        return self.stall_timeout_s if self.stall_timeout_s is not None else max(0.25, 4 / self.rate_hz)


def safety_for(robot: Robot, config: RunConfig) -> SafetyConfig:
    """Action limits from the robot ([A, 2]): its `action_limits` when it has them (velocity or increment bounds),
    else its `joint_limits` for absolute targets; plus the run's max step and fallback."""
    limits = getattr(robot, "action_limits", None)
    if limits is None and config.executor.action_kind == "absolute":
        limits = getattr(robot, "joint_limits", None)
    low = high = None
    if limits is not None:
        limits = np.asarray(limits, np.float64)
        low, high = tuple(limits[:, 0].tolist()), tuple(limits[:, 1].tolist())
    names = getattr(robot, "action_names", None)  # the clamp warning names the entries
    return SafetyConfig(low, high, config.max_step, config.on_missing, config.executor.action_kind,
                        action_names=None if names is None else tuple(map(str, names)))  # fmt: skip


def fit_policy(robot: Robot, meta: Metadata, config: RunConfig) -> tuple[dict[str, str | None], np.ndarray | None]:
    """(camera map, action_state_index) when the robot can run the policy; ShapeError naming both sides if not."""
    name, (s, a) = type(robot).__name__, (state_dim(robot), action_dim(robot))
    if (s, a) != (meta.state_dim, meta.action_dim):
        raise ShapeError(f"policy {meta.model_id!r} expects state_dim {meta.state_dim} and action_dim "
                         f"{meta.action_dim}; the robot ({name}) has state_dim {s} and action_dim {a}")  # fmt: skip
    cameras = resolve_camera_map(robot_cameras(robot), meta.cameras, config.camera_map)
    index = action_state_index(robot)
    if index is None and config.executor.mode == "vlash":
        raise ShapeError(f"vlash mode rolls the state forward from the actions, but the robot ({name}) does not say "
                         f"which of its {s} state entries its {a} action entries are (state_names / action_names); "
                         "use another mode or name them")  # fmt: skip
    if index is None and config.max_step is not None and not callable(getattr(robot, "hold_action", None)):
        raise ShapeError(f"max_step needs the measured positions of the commanded joints; the robot ({name}) gives "
                         "neither state_names / action_names nor hold_action(observation)")  # fmt: skip
    return cameras, index
