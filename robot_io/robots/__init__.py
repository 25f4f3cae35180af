"""Robots the runner can drive: the simulated arm, any LeRobot robot, and an OpenCV camera source."""

from __future__ import annotations

from robot_io.robots.base import Robot
from robot_io.robots.camera import OpenCVCamera
from robot_io.robots.lerobot_robot import LeRobotRobot
from robot_io.robots.sim_robot import EpisodeOutcome, SimRobot


def make_robot(spec: str) -> Robot:
    """A robot from a command-line spec: "sim:<task>[:<seed>]". LeRobot robots are built in Python
    (their configs are LeRobot's) and wrapped with LeRobotRobot(robot)."""
    if spec.startswith("sim:"):
        return SimRobot.from_spec(spec)
    raise ValueError(f"unknown robot spec {spec!r}; the command line supports 'sim:<task>[:<seed>]'")


__all__ = ["EpisodeOutcome", "LeRobotRobot", "OpenCVCamera", "Robot", "SimRobot", "make_robot"]
