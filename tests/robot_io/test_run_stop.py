"""A run asked to stop (the event `vlash run` sets on Ctrl-C): the loop ends after its current tick, the hold is
commanded once, and the result says so and what the robot was left doing (simulated clock, fake policy)."""

from __future__ import annotations

import threading

import numpy as np

from robot_io.control import SimulatedClock
from robot_io.executors import ExecutorConfig
from robot_io.runner import RunConfig, Runner
from robot_io.safety import Safety, SafetyConfig
from tests.fakes import PointArm, point_metadata, ramp_planner
from vlash.sim.policy_link import SimulatedPolicyLink

RATE, H = 30.0, 30


class RecordingArm(PointArm):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[np.ndarray] = []

    def send_action(self, action):
        self.sent.append(np.asarray(action["action"], np.float32).copy())
        return super().send_action(action)


def runner(stop: threading.Event, status=None) -> Runner:
    clock = SimulatedClock()
    client = SimulatedPolicyLink(ramp_planner(H), point_metadata(chunk_length=H), clock, latency_s=0.05)
    config = ExecutorConfig("vlash", execution_horizon=5, initial_delay=2, adapt_delay=False)
    return Runner(RecordingArm(), client, RunConfig(config, rate_hz=RATE, duration_s=10.0), clock, status, stop=stop)


def test_a_stopped_run_ends_after_the_tick_commands_the_hold_and_says_what_the_robot_does():
    stop = threading.Event()
    run = runner(stop, status=lambda status: stop.set() if status["chunks"] >= 3 else None)
    result = run.run()
    arm, s = run.robot, result.summary
    assert result.stopped and s.chunks >= 3 and s.ticks < 100  # not the 300 ticks of its 10 s
    assert len(arm.sent) == s.ticks + 1  # every tick's command, then the hold
    assert np.array_equal(arm.sent[-1], arm.sent[-2])  # the hold: the last command again, not the chunk's next
    assert not np.array_equal(arm.sent[-2], arm.sent[-3])  # the ramp was still moving when it was stopped
    assert result.left == "holds the last command sent"


def test_a_stop_before_the_loop_runs_no_tick_and_sends_nothing():
    stop = threading.Event()
    stop.set()  # e.g. Ctrl-C during the handshake
    run = runner(stop)
    result = run.run()
    assert result.stopped and result.summary.ticks == 0 and run.robot.sent == []
    assert result.left == "was sent nothing: its own controller keeps the goal it had"


def test_the_hold_is_described_as_what_it_commands():
    assert Safety(SafetyConfig(action_kind="velocity"), 2).hold_choice(None)[1] == (
        "stands still (commanded zero velocity)"
    )
    stop_here = Safety(SafetyConfig(on_missing="stop"), 2)
    action, what = stop_here.hold_choice(np.ones(2, np.float32))
    assert action.tolist() == [1.0, 1.0] and what == "holds its measured position"
    assert Safety(SafetyConfig(), 2).hold_choice(None) == (None, "was sent nothing: its own controller keeps the goal "
                                                           "it had")  # fmt: skip
