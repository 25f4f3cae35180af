"""LeRobotRobot: any object with LeRobot's Robot interface as a robot_io Robot (lerobot itself never imported).

LeRobot robots describe flat features: "<motor>.pos" -> float for joints, "<camera>" -> (H, W, 3) for images.
The action is the robot's `action_features` (all "<joint>.pos": position-controlled arms), in their order; the
state is every float observation feature, in its order (the action's joints and any extra readings). Camera
features become "images.<camera>"; robot_io cameras (OpenCVCamera) may be added under their own names.
Other features (e.g. "<cam>_depth" (H, W, 1)) are not sent.

Hold: the action's joints are position servos, which keep their last goal when no command arrives
(`holds_position`); before any command the hold is the measured positions (`state_names` / `action_names`).
That holds while connected. LeRobot's `disconnect()` then turns the torque off on every motor when the robot's config
says `disable_torque_on_disconnect: true` (LeRobot's default): the arm goes limp and may fall under gravity.
`after_disconnect` says so, for the runner's report of what a stopped run left the robot doing.

Connect: LeRobot may ask questions on the terminal (calibration: `input()`). With no terminal to answer them
(systemd, nohup, `< /dev/null`) connect raises CalibrationRequired, one line naming LeRobot's command that
calibrates the arm. Whatever connect got to before it failed (the motor bus, cameras) is released at once, and
`disconnect()` releases what is connected of a robot connected only in part (LeRobot's own `disconnect()` refuses
one: it checks `is_connected`, which needs every part).

Capture time: LeRobot reads the motors first and then each camera's latest frame, inside one
`get_observation()`; the state's stamp is taken just before that call (the wall clock when the motor read
starts). A robot_io camera frame carries its own grab time (read_latest's stamp). The observation's
capture_time_ns is the oldest of these: an observation is as old as its oldest part. LeRobot's own cameras give
no frame time; their latest frame is at most about one camera period older than the state's stamp.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from robot_io.protocol.errors import RobotIOError, ShapeError
from robot_io.robots.base import RobotConfigError, action_vector
from robot_io.robots.camera import OpenCVCamera
from robot_io.robots.terminal_prompts import TerminalPrompts
from robot_io.specs import ArraySpec

JOINT_SUFFIX = ".pos"
log = logging.getLogger(__name__)


class ConnectFailed(RobotIOError):
    """LeRobot could not open the arm or a camera (no such port or device, no power): its multi-line message made one
    line that says what to check."""


class CalibrationRequired(RobotConfigError):
    """LeRobot asked a calibration question on connect and there was no terminal to answer it."""


def _is_image(feature: Any) -> bool:
    return isinstance(feature, tuple) and len(feature) == 3 and feature[2] == 3


def calibrate_command(robot_type: str, config: Any) -> str:
    """LeRobot's command that calibrates this robot, with the fields that find its port and calibration file."""
    flags = [f"--robot.type={robot_type}"]
    for name in ("port", "id", "calibration_dir"):
        value = getattr(config, name, None)
        if value is not None:
            flags.append(f"--robot.{name}={value}")
    return " ".join(["lerobot-calibrate", *flags])


def release(device: Any, depth: int = 0) -> None:
    """Disconnect a LeRobot device (robot, motor bus, camera), or, when it is connected only in part, each of its parts
    that is connected (a robot's buses, cameras and sub-robots, two levels down). A motor bus is told the robot's
    `disable_torque_on_disconnect`, as LeRobot's own `disconnect()` tells it."""
    connected = getattr(device, "is_connected", None)
    if connected is None or connected:  # a device that does not say: its own disconnect() decides
        device.disconnect()
        return
    if depth >= 2:
        return
    torque_off = getattr(getattr(device, "config", None), "disable_torque_on_disconnect", True)
    for part in _parts(device):
        if hasattr(part, "motors"):  # a motor bus: disconnect(disable_torque)
            if part.is_connected:
                part.disconnect(torque_off)
        else:
            release(part, depth + 1)


def _parts(device: Any) -> list[Any]:
    """The devices a LeRobot robot holds as attributes: buses, sub-robots (bimanual arms) and its cameras' dict."""
    parts = []
    for value in getattr(device, "__dict__", {}).values():
        for item in value.values() if isinstance(value, dict) else (value,):
            if item is not device and hasattr(item, "is_connected") and callable(getattr(item, "disconnect", None)):
                parts.append(item)
    return parts


class LeRobotRobot:
    holds_position = True  # position servos keep their last goal when commands stop

    def __init__(self, robot: Any, cameras: dict[str, OpenCVCamera] | None = None, max_frame_age_s: float = 0.5,
                 robot_type: str | None = None):  # fmt: skip
        """`robot_type`: the type it was built as (its config's registry name), for the calibration command."""
        self.robot, self.cameras, self.max_frame_age_s = robot, dict(cameras or {}), max_frame_age_s
        self.robot_type = robot_type or str(getattr(getattr(robot, "config", None), "type", type(robot).__name__))
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

    @property
    def after_disconnect(self) -> str | None:
        """What `disconnect()` leaves the robot doing when it stops holding (torque off), in words; None: it holds."""
        if getattr(getattr(self.robot, "config", None), "disable_torque_on_disconnect", False) is not True:
            return None
        return ("has its torque off (disable_torque_on_disconnect: true in its config): the arm is limp and may fall "
                "under gravity; disable_torque_on_disconnect: false keeps it holding its last command")  # fmt: skip

    def connect(self) -> None:
        """Connect the LeRobot robot, then the robot_io cameras; on failure release what was connected (see the
        module doc); CalibrationRequired when LeRobot asked a question nobody could answer."""
        prompts = TerminalPrompts()
        try:
            with prompts:
                self.robot.connect()
            for cam in self.cameras.values():
                cam.connect()
        except BaseException as exc:
            try:
                self.disconnect()
            except Exception as cleanup:  # the connect error is the one to report
                log.warning("%s: releasing it after a failed connect failed too: %s", self.robot_type, cleanup)
            if isinstance(exc, EOFError) or (prompts.unanswered and isinstance(exc, Exception)):
                config = getattr(self.robot, "config", None)
                raise CalibrationRequired(
                    f"the {self.robot_type} arm {getattr(config, 'id', None)!r} needs calibrating, and LeRobot asks "
                    "for it on a terminal this run does not have (standard input gave no answer); calibrate it once "
                    f"from a terminal: {calibrate_command(self.robot_type, config)}"
                ) from None
            if isinstance(exc, OSError):  # ConnectionError, serial's SerialException: a port or device missing
                what = " ".join(str(exc).split()) or type(exc).__name__
                raise ConnectFailed(
                    f"the {self.robot_type} could not connect: {what} (check the port and the cameras in its "
                    "--robot-config, and that the arm is powered and plugged in)"
                ) from None
            raise

    def disconnect(self) -> None:
        """Release the robot_io cameras and the LeRobot robot, also one connected only in part (after a failed
        connect); nothing to do for one not connected."""
        for cam in self.cameras.values():
            cam.disconnect()
        release(self.robot)

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
