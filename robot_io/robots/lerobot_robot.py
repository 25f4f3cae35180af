"""LeRobotRobot: any object with LeRobot's Robot interface as a robot_io Robot (lerobot itself never imported).

LeRobot robots describe flat features: "<motor>.pos" -> float for joints, "<camera>" -> (H, W, 3) for images.
The action is the robot's `action_features` (all "<joint>.pos": position-controlled arms), in their order; the
state is every float observation feature, in its order (the action's joints and any extra readings). Camera
features become "images.<camera>"; robot_io cameras (OpenCVCamera) may be added under their own names.
Other features (e.g. "<cam>_depth" (H, W, 1)) are not sent.

Hold: the action's joints are position servos, which keep their last goal when no command arrives
(`holds_position`); before any command the hold is the measured positions (`state_names` / `action_names`).

Capture time: LeRobot reads the motors first and then each camera's latest frame, inside one
`get_observation()`; the state's stamp is taken just before that call (the wall clock when the motor read
starts). A robot_io camera frame carries its own grab time (read_latest's stamp). The observation's
capture_time_ns is the oldest of these: an observation is as old as its oldest part. LeRobot's own cameras give
no frame time; their latest frame is at most about one camera period older than the state's stamp.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from robot_io.protocol.errors import ShapeError
from robot_io.protocol.specs import ArraySpec
from robot_io.robots.base import action_vector
from robot_io.robots.camera import OpenCVCamera

JOINT_SUFFIX = ".pos"


def _is_image(feature: Any) -> bool:
    return isinstance(feature, tuple) and len(feature) == 3 and feature[2] == 3


class LeRobotRobot:
    holds_position = True  # position servos keep their last goal when commands stop

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
        self.readings = [k for k, v in obs.items() if v is float]  # the state's entries
        self.robot_cameras = {k: tuple(v) for k, v in obs.items() if _is_image(v)}
        clash = sorted(set(self.robot_cameras) & set(self.cameras))
        if clash:
            raise ShapeError(f"LeRobotRobot: cameras {clash} exist on the LeRobot robot and as robot_io cameras")

    @property
    def state_names(self) -> list[str]:
        return list(self.readings)

    @property
    def action_names(self) -> list[str]:
        return list(self.joints)

    @property
    def observation_features(self) -> dict[str, ArraySpec]:
        feats = {"state": ArraySpec("state", (len(self.readings),), "float32")}
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
        stamp = time.time_ns()  # the motor read starts now (see the module doc)
        raw = self.robot.get_observation()
        state = np.array([raw[k] for k in self.readings], np.float32)
        images = {name: np.asarray(raw[name], np.uint8) for name in self.robot_cameras}
        for name, cam in self.cameras.items():
            images[name], grabbed_ns = cam.read_latest(self.max_frame_age_s)  # DeadlineExceeded if stalled
            stamp = min(stamp, time.time_ns() - (time.monotonic_ns() - grabbed_ns))  # grab time, on the wall clock
        return {"state": state, "images": images, "capture_time_ns": stamp}

    def send_action(self, action: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vector = action_vector(action, self.action_features["action"])
        sent = self.robot.send_action({j: float(v) for j, v in zip(self.joints, vector, strict=True)})
        return {"action": np.array([sent.get(j, v) for j, v in zip(self.joints, vector, strict=True)], np.float32)}
