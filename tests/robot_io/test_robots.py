"""Robots: the simulated arm, the LeRobot adapter (with a fake LeRobot-style robot), the OpenCV camera.
Building LeRobot robots from their configs is in test_lerobot_factory.py."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

from robot_io.protocol.errors import DeadlineExceeded, RobotIOError, ShapeError
from robot_io.robots import LeRobotRobot, OpenCVCamera, Robot, RobotConfigError, make_robot
from robot_io.robots.base import action_state_index, robot_cameras
from vlash.sim.robot import SimRobot


def test_sim_spec_parsing():
    """The simulator's arm is built from its spec by vlash.sim (robot_io's make_robot knows only robot_io's robots)."""
    robot = SimRobot.from_spec("sim:whack:7")
    assert isinstance(robot, SimRobot) and robot.task == "whack" and robot.seed == 7
    for bad in ("sim:", "sim:reach:x"):
        with pytest.raises(ValueError, match="spec"):
            SimRobot.from_spec(bad)
    for bad in ("real:arm", "lerobot:", "sim:reach"):
        with pytest.raises(ValueError, match="spec"):
            make_robot(bad)
    with pytest.raises(RobotConfigError, match="applies to lerobot"):
        make_robot("mock", "robot.yaml")


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
def test_sim_robot_steps_once_per_action_and_restarts_episodes():
    robot = SimRobot("reach", seed=3)
    robot.connect()
    assert isinstance(robot, Robot)
    obs = robot.get_observation()
    assert obs["episode_start"] and obs["state"].shape == (2,) and obs["images"]["base_0_rgb"].shape == (96, 96, 3)
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


@pytest.mark.sim
def test_sim_robot_follows_the_settings_action_interface():
    from vlash.sim import load_sim_settings

    settings = load_sim_settings(None, ["action_interface=velocity", "image_size=32"])
    robot = SimRobot("hold", seed=1, settings=settings)
    assert robot.action_interface == "velocity" and robot.action_kind == "velocity" and robot.image_size == 32
    assert robot.state_names == robot.action_names == ["joint0", "joint1"]  # known before connect
    robot.connect()
    assert robot.env.action_interface == "velocity" and robot.observation_features["images.base_0_rgb"].shape[0] == 32
    np.testing.assert_allclose(robot.action_limits, [[-3.0, 3.0], [-3.0, 3.0]])
    sent = robot.send_action({"action": np.array([5.0, -0.5], np.float32)})["action"]
    assert sent.tolist() == [3.0, -0.5]  # clipped to the joint speed limit, not to the joint limits
    for _ in range(200):
        robot.send_action({"action": robot.env.expert_action()})
        if robot.episodes:
            break
    assert robot.episodes[0].success and [e["kind"] for e in robot.episodes[0].events][-1] == "hold"
    ee = SimRobot("reach", seed=3, env_options={"action_interface": "ee_delta"}, settings=settings)
    assert ee.action_interface == "ee_delta" and ee.state_names == ["ee_x", "ee_y"] and ee.action_kind == "delta"
    ee.connect()
    obs = ee.get_observation()
    np.testing.assert_allclose(obs["state"], ee.env.arm_state.ee_target, atol=1e-6)  # the end effector
    assert ee.send_action({"action": np.array([1.0, 0.0], np.float32)})["action"][0] == pytest.approx(0.13)


@pytest.mark.sim
def test_sim_robot_names_the_extras_after_the_joints_it_commands():
    from vlash.sim import load_sim_settings

    settings = load_sim_settings(None, ["action_interface=velocity", "observe=[joint_velocity,target]"])
    robot = SimRobot("intercept", seed=0, settings=settings)
    names = ["joint0", "joint1", "joint0_velocity", "joint1_velocity", "target_x", "target_y", "target_vx", "target_vy"]
    assert robot.state_names == names and robot.action_names == ["joint0", "joint1"]  # known before connect
    assert robot.observation_features["state"].shape == (8,) and robot.action_features["action"].shape == (2,)
    np.testing.assert_array_equal(action_state_index(robot), [0, 1])  # what vlash mode rolls forward
    robot.connect()
    obs = robot.get_observation()
    assert obs["state"].shape == (8,) and robot.env.state_names == names
    robot.send_action({"action": np.zeros(2, np.float32)})
    np.testing.assert_array_equal(robot.get_observation()["state"][:2], robot.env.arm_state.q.astype(np.float32))


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


def test_lerobot_adapter_state_has_every_reading_and_names_the_action_joints():
    class WithCurrent(FakeLeRobot):  # a reading that is not an action joint, and a depth image (not sent)
        observation_features = {"shoulder.pos": float, "shoulder.current": float, "elbow.pos": float,
                                 "front": (8, 6, 3), "front_depth": (8, 6, 1)}  # fmt: skip

        def get_observation(self):
            return super().get_observation() | {"shoulder.current": 3.0, "front_depth": np.zeros((8, 6, 1))}

    robot = LeRobotRobot(WithCurrent())
    assert robot.observation_features["state"].shape == (3,) and list(robot_cameras(robot)) == ["front"]
    assert robot.state_names == ["shoulder.pos", "shoulder.current", "elbow.pos"] and robot.holds_position
    np.testing.assert_array_equal(action_state_index(robot), [0, 2])
    np.testing.assert_array_equal(robot.get_observation()["state"], [0.5, 3.0, -0.25])


def test_lerobot_capture_time_is_taken_when_the_state_is_read_not_after_the_whole_read():
    class SlowCameras(FakeLeRobot):  # the motors are read first, then the cameras (slow here)
        def get_observation(self):
            self.read_at = time.time_ns()
            time.sleep(0.05)
            return super().get_observation()

    inner = SlowCameras()
    obs = LeRobotRobot(inner).get_observation()
    assert obs["capture_time_ns"] <= inner.read_at  # stamped before the motor read, not after the cameras


class OldFrameCamera:
    """A robot_io camera whose newest frame was grabbed 200 ms ago (monotonic stamp, as OpenCVCamera's)."""

    height, width = 4, 5

    def connect(self):
        pass

    def disconnect(self):
        pass

    def read_latest(self, max_age_s=None):
        return np.zeros((4, 5, 3), np.uint8), time.monotonic_ns() - 200_000_000


def test_a_camera_frame_time_makes_the_observation_as_old_as_its_oldest_part():
    before = time.time_ns()
    obs = LeRobotRobot(FakeLeRobot(), cameras={"side": OldFrameCamera()}).get_observation()
    after = time.time_ns()
    assert obs["images"]["side"].shape == (4, 5, 3)
    assert before - 200_000_000 - 5_000_000_000 < obs["capture_time_ns"] <= after - 200_000_000


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
