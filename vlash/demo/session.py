"""Drive the simulated arm through a policy server once per execution mode (same task seeds each time)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from robot_io.client import PolicyClient
from robot_io.executors import ExecutorConfig
from robot_io.rerun_trace import RerunRecording, RerunTrace
from robot_io.runner import RunConfig, RunResult, run_robot
from vlash.sim.robot import SimRobot


@dataclass(frozen=True)
class DemoConfig:
    """One demo run per mode; everything else is shared."""

    task: str = "reach"  # simulated task (reach, track, whack, intercept)
    seed: int = 0  # first episode seed (every mode sees the same episodes)
    rate_hz: float = 30.0  # control rate [Hz]
    duration_s: float = 20.0  # run length per mode [s]
    execution_horizon: int = 20  # s: control steps of a chunk before the next one takes over
    initial_delay: int = 3  # d0 until latencies are measured
    timeout_s: float = 5.0  # client handshake / reply timeout

    def __post_init__(self) -> None:
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ValueError(f"DemoConfig.duration_s must be > 0, got {self.duration_s}")
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ValueError(f"DemoConfig.rate_hz must be > 0, got {self.rate_hz}")
        self.run_config("vlash")  # the rest is checked where it is defined (ExecutorConfig, RunConfig)

    def run_config(self, mode: str) -> RunConfig:
        """The run of `mode`, keeping every tick and chunk record in memory: the plot needs all of them."""
        ticks = math.ceil(self.duration_s * self.rate_hz) + 1
        executor = ExecutorConfig(mode=mode, execution_horizon=self.execution_horizon,
                                  initial_delay=self.initial_delay, record_window=ticks)  # fmt: skip
        return RunConfig(executor, rate_hz=self.rate_hz, duration_s=self.duration_s, trace_ticks=ticks)


def run_mode(
    endpoint: str,
    mode: str,
    config: DemoConfig,
    status: Callable[[dict[str, Any]], None] | None = None,
    recording: RerunRecording | None = None,
) -> RunResult:
    """One run of `mode` with a fresh client and a fresh simulated robot named after the policy's camera; logged to
    `recording` under the mode's name when given."""
    run_config = config.run_config(mode)
    with PolicyClient(endpoint, timeout_s=config.timeout_s, client_name=f"vlash-demo:{mode}") as client:
        cameras = client.connect().cameras
        camera = cameras[0].name if len(cameras) == 1 else "image"
        robot = SimRobot(config.task, seed=config.seed, camera=camera)
        traces = [] if recording is None else [RerunTrace(recording, mode, (robot.state_names, robot.action_names))]
        return run_robot(robot, client, run_config, status=status, traces=traces)


def run_modes(
    endpoint: str,
    modes: Sequence[str],
    config: DemoConfig,
    status: Callable[[str, dict[str, Any]], None] | None = None,
    recording: RerunRecording | None = None,
) -> dict[str, RunResult]:
    """`run_mode` for each mode in turn (into one recording, each mode under its name)."""
    results = {}
    for mode in modes:
        shown = None if status is None else lambda s, m=mode: status(m, s)
        results[mode] = run_mode(endpoint, mode, config, shown, recording)
    return results
