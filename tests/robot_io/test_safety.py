"""Safety: joint-limit and max-step clamps; the hold/stop fallback in action space (counted, never raising); the
stall watchdog thread (simulated clock: the stall is simulated time passing with no completed tick)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from robot_io.control import SimulatedClock
from robot_io.safety import Safety, SafetyConfig, StallWatchdog


def test_clamps_to_joint_limits_and_max_step_from_the_last_command():
    safety = Safety(SafetyConfig(joint_low=(-1.0, -1.0), joint_high=(1.0, 1.0), max_step=0.1))
    state = np.zeros(2, np.float32)
    sent, held = safety.filter(np.array([0.05, 0.5], np.float32), state)
    np.testing.assert_allclose(sent, [0.05, 0.1])  # first command: step measured from the state
    assert not held and safety.clamped == 1
    sent, _ = safety.filter(np.array([0.05, 0.15], np.float32), state)
    np.testing.assert_allclose(sent, [0.05, 0.15])  # within 0.1 of the last command
    safety.last_command = np.array([0.95, 0.0], np.float32)
    sent, _ = safety.filter(np.array([1.5, 0.0], np.float32), state)
    np.testing.assert_allclose(sent, [1.0, 0.0])  # joint limit


def test_missing_action_holds_the_last_command_or_stops_at_the_state():
    hold = Safety(SafetyConfig(on_missing="hold"))
    hold.filter(np.array([0.3, 0.4], np.float32), np.zeros(2))
    sent, held = hold.filter(None, np.array([0.1, 0.1], np.float32))
    np.testing.assert_allclose(sent, [0.3, 0.4])
    assert held and hold.fallbacks == 1
    stop = Safety(SafetyConfig(on_missing="stop"))
    stop.filter(np.array([0.3, 0.4], np.float32), np.zeros(2))
    sent, held = stop.filter(None, np.array([0.1, 0.2], np.float32))
    np.testing.assert_allclose(sent, [0.1, 0.2])


def test_non_finite_or_misshaped_actions_become_the_fallback():
    safety = Safety()
    state = np.array([0.5, 0.5], np.float32)
    for bad in (np.array([np.nan, 0.0], np.float32), np.zeros(3, np.float32)):
        sent, held = safety.filter(bad, state)
        assert held and np.array_equal(sent, state)
    assert safety.invalid == 2 and safety.fallbacks == 2


def test_expected_waits_are_counted_but_not_warned(caplog):
    safety = Safety()
    safety.filter(None, np.zeros(2), expected=True)
    assert safety.fallbacks == 1 and safety.unexpected == 0 and not caplog.records
    safety.filter(None, np.zeros(2))
    assert safety.unexpected == 1 and "no valid action" in caplog.text


def test_delta_actions_fall_back_to_zero_and_clamp_the_increment():
    safety = Safety(SafetyConfig(max_step=0.1, action_kind="delta"))
    sent, _ = safety.filter(np.array([0.5, -0.05], np.float32), np.ones(2))
    np.testing.assert_allclose(sent, [0.1, -0.05])
    sent, held = safety.filter(None, np.ones(2))
    assert held and not sent.any()


def test_config_is_validated():
    with pytest.raises(ValueError, match="on_missing must be one of"):
        SafetyConfig(on_missing="freeze")
    with pytest.raises(ValueError, match="low <= high"):
        SafetyConfig(joint_low=(1.0,), joint_high=(0.0,))
    with pytest.raises(ValueError, match="max_step must be > 0"):
        SafetyConfig(max_step=0.0)


def test_the_fallback_is_in_action_space_when_the_state_is_longer():
    """state_dim 5, action_dim 3: the fallback never takes the state's shape."""
    safety = Safety(SafetyConfig(max_step=0.5), action_dim=3)
    sent, held = safety.filter(None, None)  # no command yet, no measured positions: send nothing
    assert sent is None and held and safety.unsent == 1 and safety.fallbacks == 1
    measured = np.array([0.1, 0.2, 0.3], np.float32)  # the hold action read from the observation
    sent, held = safety.filter(None, measured)
    np.testing.assert_allclose(sent, measured)
    sent, _ = safety.filter(np.array([2.0, 0.2, 0.3], np.float32), measured)
    np.testing.assert_allclose(sent, [0.6, 0.2, 0.3])  # max step from the last command (the hold)
    sent, held = safety.filter(None, None)
    np.testing.assert_allclose(sent, [0.6, 0.2, 0.3])  # hold: the last command
    sent, held = safety.filter(np.zeros(5, np.float32), None)  # a state-sized action is invalid
    assert held and safety.invalid == 1 and sent.shape == (3,)


def test_stop_prefers_the_measured_positions_and_falls_back_to_the_last_command():
    stop = Safety(SafetyConfig(on_missing="stop"), action_dim=2)
    stop.filter(np.array([0.3, 0.4], np.float32), None)
    np.testing.assert_allclose(stop.filter(None, None)[0], [0.3, 0.4])
    np.testing.assert_allclose(stop.filter(None, np.array([0.1, 0.1], np.float32))[0], [0.1, 0.1])
    delta = Safety(SafetyConfig(action_kind="delta"), action_dim=3)
    assert not delta.filter(None, None)[0].any() and delta.unsent == 0


class Recorder:
    def __init__(self):
        self.calls, self.called = [], threading.Event()

    def __call__(self):
        self.calls.append(threading.current_thread().name)
        self.called.set()


def test_stall_watchdog_holds_from_its_own_thread_when_no_tick_completes():
    clock, hold = SimulatedClock(), Recorder()
    dog = StallWatchdog(hold, timeout_s=0.2, clock=clock, poll_s=0.001)
    dog.start()
    try:
        clock.advance(10.0)
        time.sleep(0.02)  # not armed before the first completed tick: nothing to hold yet
        assert not hold.calls
        dog.tick_done()
        clock.advance(0.2)  # exactly the bound: not a stall yet
        time.sleep(0.02)
        assert not hold.calls and dog.stalls == 0
        clock.advance(0.05)  # the loop thread is stuck (simulated time passes, no tick completes)
        assert hold.called.wait(10.0)
        assert hold.calls[0] == "stall-watchdog" and dog.stalls == 1
        holds = dog.holds
        clock.advance(0.25)  # still stalled: the hold is re-sent once per bound
        deadline = time.monotonic() + 10.0
        while dog.holds == holds and time.monotonic() < deadline:
            time.sleep(0.005)
        assert dog.holds == holds + 1 and dog.stalls == 1
        dog.tick_done()  # the loop recovered: a later stall is a new one
        clock.advance(0.3)
        while dog.stalls == 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert dog.stalls == 2
    finally:
        dog.stop()


def test_a_failing_hold_is_counted_and_the_watchdog_keeps_watching():
    clock, calls = SimulatedClock(), []

    def hold():
        calls.append(1)
        raise RuntimeError("bus error")

    dog = StallWatchdog(hold, timeout_s=0.1, clock=clock, poll_s=0.001)
    dog.start()
    try:
        dog.tick_done()
        clock.advance(1.0)
        deadline = time.monotonic() + 10.0
        while len(calls) < 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        clock.advance(1.0)
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(calls) == 2 and dog.failures == 2
    finally:
        dog.stop()


def test_velocity_actions_hold_at_zero_and_are_clipped_to_the_action_limits():
    safety = Safety(SafetyConfig((-1.0, -1.0), (1.0, 1.0), action_kind="velocity"), action_dim=2)
    sent, held = safety.filter(np.array([2.0, -0.5], np.float32), measured=np.array([3.0, 3.0], np.float32))
    assert not held and sent.tolist() == [1.0, -0.5]  # a rate, clipped to its bounds, never to the joint positions
    sent, held = safety.filter(None, measured=np.array([3.0, 3.0], np.float32))
    assert held and sent.tolist() == [0.0, 0.0]  # holding a velocity arm is commanding zero


def test_clamping_more_than_a_few_percent_is_warned_once_naming_the_entries_and_limits(caplog):
    """19 of 20 actions outside the limits (examples/custom_robot.py's random policy clamped 298 of 300): one
    WARNING line after the minimum count, naming the entries and limits that clamped most; never again in the run,
    not even after a new episode."""
    config = SafetyConfig(joint_low=(-1.0, 0.0), joint_high=(1.0, 0.08), max_step=0.5, action_names=("elbow", "grip"))
    safety = Safety(config)
    state = np.zeros(2, np.float32)
    for _ in range(19):
        safety.filter(np.array([3.0, 0.05], np.float32), state)  # +0.5 a tick, then at the limit 1
        assert not caplog.records  # fewer than warn_after actions: nothing said yet
    safety.filter(np.array([1.0, 0.05], np.float32), state)
    assert [r.levelname for r in caplog.records] == ["WARNING"] and caplog.records[0].getMessage().count("\n") == 0
    message = caplog.records[0].getMessage()
    assert message.startswith("safety clamped 19 of 20 actions (95%, more than 5%): elbow ")
    assert "elbow by max_step 0.5 in 19 actions; elbow to [-1, 1] in 17 actions." in message
    assert "grip" not in message  # never clamped
    safety.reset()
    for _ in range(100):
        safety.filter(np.array([3.0, 0.05], np.float32), state)
    assert len(caplog.records) == 1 and safety.clamped == 119 and safety.actions == 120


def test_a_few_clamps_or_held_ticks_are_not_warned(caplog):
    safety = Safety(SafetyConfig(joint_low=(-1.0,), joint_high=(1.0,)))
    for i in range(100):  # 5 of 100 clamped, one in every 20: never more than 5%
        safety.filter(np.array([2.0 if i % 20 == 19 else 0.5], np.float32), np.zeros(1))
    for _ in range(50):  # held ticks are no actions of the policy: not counted
        safety.filter(None, np.zeros(1), expected=True)
    assert safety.clamped == 5 and safety.actions == 100 and not caplog.records
    with pytest.raises(ValueError, match="warn_share"):
        SafetyConfig(warn_share=1.5)
