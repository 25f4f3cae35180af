"""Robots the runner can drive: any LeRobot robot, a mock arm shaped like the policy, and an OpenCV camera source.
The simulated arm is the simulator's (vlash.sim.robot.SimRobot), a Robot like any other; `vlash run --robot sim:TASK`
builds it."""

from __future__ import annotations

from pathlib import Path

from robot_io.protocol import Metadata
from robot_io.robots.base import Robot, RobotConfigError
from robot_io.robots.camera import OpenCVCamera
from robot_io.robots.lerobot_robot import LeRobotRobot
from robot_io.robots.mock_robot import MockRobot

SPECS = "'lerobot:<type>' (with --robot-config FILE.yaml) or 'mock'"


def make_robot(spec: str, config_path: str | Path | None = None, metadata: Metadata | None = None) -> Robot:
    """A robot from a command-line spec (not connected):
    "lerobot:<type>"       a LeRobot robot built by LeRobot's own config registry and factory, its config fields
                           read from `config_path` (YAML: port, id, cameras, ...), e.g. lerobot:so101_follower;
    "mock"                 a mock arm shaped like the policy the server describes (`metadata`, its METADATA).
    Other robots are built in Python: any class with the Robot interface (see examples/custom_robot.py)."""
    kind, _, rest = spec.partition(":")
    if spec == "mock":
        if config_path is not None:
            raise RobotConfigError(f"a robot config file applies to lerobot:<type> robots, not {spec!r}")
        if metadata is None:
            raise RobotConfigError("the mock robot is shaped like the policy: give the server's metadata")
        return MockRobot.for_policy(metadata)
    if kind == "lerobot":
        if not rest:
            raise RobotConfigError(f"robot spec {spec!r}: name the LeRobot robot type, e.g. lerobot:so101_follower")

        from robot_io.robots.lerobot_factory import load_robot_config, make_lerobot_robot  # extra: lerobot (and yaml)

        return make_lerobot_robot(rest, None if config_path is None else load_robot_config(config_path))
    raise RobotConfigError(f"unknown robot spec {spec!r}; the command line supports {SPECS}")


__all__ = [
    "LeRobotRobot",
    "MockRobot",
    "OpenCVCamera",
    "Robot",
    "RobotConfigError",
    "make_robot",
]
