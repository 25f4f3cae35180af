"""LeRobot's real SOFollower, FeetechMotorsBus and OpenCVCamera, built by make_robot_from_config through vlash's
factory, on emulated servos: connect, calibration matched, the no-terminal calibration case, disconnect's torque."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import yaml

from robot_io.robots.lerobot_factory import make_lerobot_robot
from robot_io.robots.lerobot_robot import CalibrationRequired


def build(path):
    return make_lerobot_robot("so101_follower", yaml.safe_load(path.read_text()))


def test_the_real_classes_connect_read_degrees_and_leave_the_torque_off(arm, robot_yaml):
    robot = build(robot_yaml())
    assert type(robot.robot).__module__ == "lerobot.robots.so_follower.so_follower"
    assert type(robot.robot.bus).__name__ == "FeetechMotorsBus"
    robot.connect()  # calibration file matches the servos: no question asked
    try:
        assert all(s.torque_on for s in arm.values())
        obs = robot.get_observation()
        assert obs["state"].shape == (6,) and sorted(obs["images"]) == ["front", "wrist"]
        assert obs["images"]["front"].shape == (224, 224, 3) and obs["images"]["wrist"][0, 0, 0] == 1
        np.testing.assert_allclose(obs["state"][:5], 0.0, atol=0.1)  # mid-range: 0 degrees
        sent = robot.send_action({"action": obs["state"] + np.float32(30.0)})["action"]
        assert np.all(sent[:5] <= obs["state"][:5] + 10.0 + 1e-3)  # LeRobot's max_relative_target clipped it
        assert all(s.goals for s in arm.values())
    finally:
        robot.disconnect()
    assert not any(s.torque_on for s in arm.values())  # disable_torque_on_disconnect: true
    assert "torque off" in robot.after_disconnect


def test_no_terminal_to_answer_calibration_is_calibration_required_and_the_bus_is_released(arm, robot_yaml,
                                                                                        monkeypatch):  # fmt: skip
    robot = build(robot_yaml(range_max=4000))  # the file does not match the servos: LeRobot asks
    with open(os.devnull) as devnull:
        monkeypatch.setattr(sys, "stdin", devnull)
        with pytest.raises(CalibrationRequired, match="lerobot-calibrate --robot.type=so101_follower"):
            robot.connect()
    assert not robot.robot.bus.is_connected and not robot.robot.bus.port_handler.is_open
