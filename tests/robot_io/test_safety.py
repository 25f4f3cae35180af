"""Safety: joint-limit and max-step clamps; the watchdog's hold/stop fallback (counted, never raising)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_io.safety import Safety, SafetyConfig


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
