"""Robots: the simulated arm, the LeRobot adapter (with a fake LeRobot-style robot), the OpenCV camera."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from robot_io.errors import DeadlineExceeded, RobotIOError, ShapeError
from robot_io.robots import LeRobotRobot, OpenCVCamera, Robot, SimRobot, make_robot


def test_sim_spec_parsing():
    robot = make_robot("sim:whack:7")
    assert isinstance(robot, SimRobot) and robot.task == "whack" and robot.seed == 7
    for bad in ("sim:", "sim:reach:x", "real:arm"):
        with pytest.raises(ValueError, match="spec"):
            make_robot(bad)


def test_sim_robot_steps_once_per_action_and_restarts_episodes():
    robot = SimRobot("reach", seed=3)
    robot.connect()
    assert isinstance(robot, Robot)
    obs = robot.get_observation()
    assert obs["episode_start"] and obs["state"].shape == (2,) and obs["images"]["image"].shape == (96, 96, 3)
    assert "target" in obs["prompt"] or "dot" in obs["prompt"]
    robot.observation_features["state"].validate(obs["state"])
    assert not robot.get_observation()["episode_start"]
    for _ in range(400):  # the scripted expert solves reach well within its 105 steps
        sent = robot.send_action({"action": robot.env.expert_action()})["action"]
        obs = robot.get_observation()
        assert sent.dtype == np.float32 and obs["sim_step"] == robot.env.step_index
        if robot.episodes:
            break
    assert robot.episodes[0].success and robot.successes == 1 and robot.episodes[0].seed == 3
    assert obs["episode_start"] and obs["sim_step"] == 0  # the next episode began
    sent = robot.send_action({"action": np.array([100.0, 0.0], np.float32)})["action"]
    assert sent[0] == pytest.approx(robot.joint_limits[0, 1])  # what was really sent: clipped
    with pytest.raises(ShapeError):
        robot.send_action({"action": np.zeros(3, np.float32)})
    robot.disconnect()


class FakeLeRobot:
    """The LeRobot Robot interface: flat '<joint>.pos' and camera features."""

    observation_features = {"shoulder.pos": float, "elbow.pos": float, "front": (8, 6, 3)}
    action_features = {"shoulder.pos": float, "elbow.pos": float}

    def __init__(self):
        self.connected, self.sent = False, []

    def connect(self):
        self.connected = True

    def disconnect(self):
        self.connected = False

    def get_observation(self):
        return {"shoulder.pos": 0.5, "elbow.pos": -0.25, "front": np.full((8, 6, 3), 7, np.uint8)}

    def send_action(self, action):
        self.sent.append(action)
        return {k: min(v, 1.0) for k, v in action.items()}  # the robot clips


def test_lerobot_adapter_maps_joints_and_cameras():
    inner = FakeLeRobot()
    robot = LeRobotRobot(inner)
    assert robot.joints == ["shoulder.pos", "elbow.pos"]
    assert robot.observation_features["images.front"].shape == (8, 6, 3)
    robot.connect()
    obs = robot.get_observation()
    np.testing.assert_array_equal(obs["state"], [0.5, -0.25])
    assert obs["images"]["front"].shape == (8, 6, 3) and obs["capture_time_ns"] > 0
    sent = robot.send_action({"action": np.array([2.0, 0.1], np.float32)})
    assert inner.sent[-1] == {"shoulder.pos": 2.0, "elbow.pos": pytest.approx(0.1)}
    np.testing.assert_allclose(sent["action"], [1.0, 0.1])
    robot.disconnect()
    assert not inner.connected


def test_lerobot_adapter_refuses_non_joint_actions():
    class Weird(FakeLeRobot):
        action_features = {"gripper.effort": float}

    with pytest.raises(ShapeError, match="<joint>.pos"):
        LeRobotRobot(Weird())


class FakeCapture:
    """cv2.VideoCapture stand-in: BGR frames numbered by their blue channel."""

    def __init__(self, source, frames=5, opened=True):
        self.source, self.left, self.opened, self.props, self.released = source, frames, opened, {}, False
        self.count = 0
        self.exhausted = threading.Event()

    def isOpened(self):  # noqa: N802 - OpenCV's name
        return self.opened

    def set(self, prop, value):
        self.props[prop] = value

    def read(self):
        if self.left == 0:
            self.exhausted.set()
            return False, None
        self.left -= 1
        self.count += 1
        frame = np.zeros((4, 5, 3), np.uint8)
        frame[..., 0] = self.count  # blue in BGR
        return True, frame

    def release(self):
        self.released = True


def test_opencv_camera_grabs_in_the_background_and_returns_the_latest_rgb_frame():
    captures = []

    def factory(source):
        captures.append(FakeCapture(source))
        return captures[-1]

    cam = OpenCVCamera(2, width=5, height=4, capture_factory=factory)
    cam.connect()
    assert captures[0].exhausted.wait(5.0)
    frame, stamp = cam.read_latest()
    assert frame.shape == (4, 5, 3) and frame[0, 0, 2] == 5 and frame[0, 0, 0] == 0  # newest, BGR -> RGB
    assert captures[0].props == {3: 5, 4: 4} and stamp > 0 and cam.frames == 5
    with pytest.raises(DeadlineExceeded, match="old"):
        cam.read_latest(max_age_s=0.0)
    cam.disconnect()
    assert captures[0].released


def test_opencv_camera_errors_are_clear():
    with pytest.raises(RobotIOError, match="cannot open"):
        OpenCVCamera(0, capture_factory=lambda s: FakeCapture(s, opened=False)).connect()
    with pytest.raises(DeadlineExceeded, match="no frame"):
        OpenCVCamera(0, connect_timeout_s=0.05, capture_factory=lambda s: FakeCapture(s, frames=0)).connect()


def test_missing_opencv_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "cv2", None)  # import cv2 -> ImportError
    with pytest.raises(RobotIOError, match="pip install opencv"):
        OpenCVCamera(0).connect()
