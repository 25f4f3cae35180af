"""LeRobotRobot: any object with LeRobot's Robot interface as a robot_io Robot (lerobot itself never imported).

LeRobot robots describe flat features: "<joint>.pos" -> float for joints, "<camera>" -> (H, W, 3) for images.
The adapter orders joints as in `action_features`, stacks them into the state/action vectors, collects camera
features into "images", and may add robot_io cameras (OpenCVCamera) under their own names.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from robot_io.errors import ShapeError
from robot_io.robots.base import action_vector
from robot_io.robots.camera import OpenCVCamera
from robot_io.specs import ArraySpec

JOINT_SUFFIX = ".pos"


class LeRobotRobot:
    def __init__(self, robot: Any, cameras: dict[str, OpenCVCamera] | None = None, max_frame_age_s: float = 0.5):
        self.robot, self.cameras, self.max_frame_age_s = robot, dict(cameras or {}), max_frame_age_s
        actions = dict(robot.action_features)
        self.joints = [k for k in actions if k.endswith(JOINT_SUFFIX)]
        if not self.joints or len(self.joints) != len(actions):
            raise ShapeError(f"LeRobotRobot: action features must all be '<joint>{JOINT_SUFFIX}', got {list(actions)}")
        obs = dict(robot.observation_features)
        missing = [j for j in self.joints if j not in obs]
        if missing:
            raise ShapeError(f"LeRobotRobot: joints {missing} have an action but no observation feature")
        self.robot_cameras = {k: tuple(v) for k, v in obs.items() if isinstance(v, tuple) and len(v) == 3}

    @property
    def observation_features(self) -> dict[str, ArraySpec]:
        feats = {"state": ArraySpec("state", (len(self.joints),), "float32")}
        for name, shape in self.robot_cameras.items():
            feats[f"images.{name}"] = ArraySpec(name, shape, "uint8")
        for name, cam in self.cameras.items():
            feats[f"images.{name}"] = ArraySpec(name, (cam.height, cam.width, 3), "uint8")
        return feats

    @property
    def action_features(self) -> dict[str, ArraySpec]:
        return {"action": ArraySpec("action", (len(self.joints),), "float32")}

    def connect(self) -> None:
        self.robot.connect()
        for cam in self.cameras.values():
            cam.connect()

    def disconnect(self) -> None:
        for cam in self.cameras.values():
            cam.disconnect()
        self.robot.disconnect()

    def get_observation(self) -> dict[str, Any]:
        raw = self.robot.get_observation()
        stamp = time.time_ns()
        state = np.array([raw[j] for j in self.joints], np.float32)
        images = {name: np.asarray(raw[name], np.uint8) for name in self.robot_cameras}
        for name, cam in self.cameras.items():
            images[name] = cam.read_latest(self.max_frame_age_s)[0]  # DeadlineExceeded if stalled
        return {"state": state, "images": images, "capture_time_ns": stamp}

    def send_action(self, action: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vector = action_vector(action, self.action_features["action"])
        sent = self.robot.send_action({j: float(v) for j, v in zip(self.joints, vector, strict=True)})
        return {"action": np.array([sent.get(j, v) for j, v in zip(self.joints, vector, strict=True)], np.float32)}
