"""The e2e tests' real-time quantities, taken from the served chunk latency measured just before each run
(tests/timing.py), so that a loaded machine runs the same scenario in control steps as an idle one, only slower.

Idle, the shipped policy serves a chunk in 70-125 ms and the runs go at 30 Hz with the timeouts below close to
the values these tests had as constants; with load 5-9 on 2 cores a chunk takes 300-800 ms and the rate and
every timeout scale with it."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from robot_io.client import PolicyClient
from robot_io.executors import ExecutorConfig
from robot_io.protocol import Infer
from robot_io.runner import RunConfig
from tests.timing import Pace, measure_pace

NOMINAL_HZ = 30.0  # the rate of every run whose chunk latency allows it
CHUNK_PERIODS = 4  # ... a chunk spans at most this many periods: d <= 4 of s = 10 (2-4 at 30 Hz idle)
HORIZON, INITIAL_DELAY = 10, 3  # s and d0 of every run
PATIENCE_CHUNKS = 20  # executor request and link timeouts, in chunk latencies (~2 s idle: the defaults)
PROBE_TIMEOUT_S = 60.0  # the probes' own wait: nothing is measured yet (a loaded machine answers in ~1 s)
SIM_FRAME = 96  # the simulated camera's side (SimRobot's image_size): what the robot sends


def probe_pace(server, schedule: str | None = None, probes: int = 5) -> Pace:
    """The served chunk latency now, probed with requests like the robot's: its frame size, the policy's state
    size, and `schedule` (horizon-aware chunks, which stream, cost ~1.7x the constant schedule's)."""
    meta = server.metadata
    images = {meta.cameras[0].name: np.zeros((SIM_FRAME, SIM_FRAME, 3), np.uint8)}
    state = np.zeros(meta.state_dim, np.float32)
    with PolicyClient(server.endpoint, timeout_s=PROBE_TIMEOUT_S, client_name="e2e-probe") as client:

        def infer(i: int) -> None:
            request = Infer(i + 1, 0, time.time_ns(), "reach", images, state, schedule=schedule,
                            execution_horizon=HORIZON)  # fmt: skip
            client.infer(request)

        return measure_pace(infer, probes)


def paced_run_config(mode: str, pace: Pace, steps: int, **executor: Any) -> RunConfig:
    """`steps` control steps of `mode` at the pace's rate (status every period). Request and link timeouts are
    PATIENCE_CHUNKS chunk latencies unless given."""
    rate = pace.rate_hz(NOMINAL_HZ, CHUNK_PERIODS)
    patience = pace.seconds(PATIENCE_CHUNKS)
    executor = dict(request_timeout_s=patience, link_timeout_s=patience) | executor
    config = ExecutorConfig(mode=mode, execution_horizon=HORIZON, initial_delay=INITIAL_DELAY, **executor)
    return RunConfig(config, rate_hz=rate, duration_s=steps / rate, status_every_s=1 / rate)


def client_timeout_s(config: RunConfig) -> float:
    """The PolicyClient's reply timeout for a run of `config`: twice the executor's, so the client drops the
    connection only after the executor gave up on a request and re-sent it (as with the defaults, 5 s and 2 s)."""
    return 2 * config.executor.request_timeout_s


def run_bound_s(config: RunConfig) -> float:
    """The longest a run of `config` can take: its schedule, the handshake (within the client's timeout), and a
    last tick that overran by as much again: how long to wait for a thread that runs one."""
    return config.duration_s + 2 * client_timeout_s(config)
