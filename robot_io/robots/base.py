"""The Robot interface the runner drives (LeRobot-like, with the state and images as arrays).

    robot.observation_features  # {"state": ArraySpec [J] float32, "images.<cam>": ArraySpec [H, W, 3] uint8}
    robot.action_features       # {"action": ArraySpec [J] float32}
    robot.connect(); obs = robot.get_observation(); sent = robot.send_action({"action": a}); robot.disconnect()

An observation is a dict: "state" float32 [J], "images" {camera: uint8 [H, W, 3]}, "capture_time_ns" (wall
clock, time.time_ns, it crosses machines) and optionally "prompt" (task instruction of simulated tasks) and
"episode_start" (True on the first observation of a new episode: the runner then drops chunks in flight).
`send_action` returns the action really sent (after the robot's own clipping), as a dict like its argument.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from robot_io.specs import ArraySpec


@runtime_checkable
class Robot(Protocol):
    @property
    def observation_features(self) -> dict[str, ArraySpec]: ...

    @property
    def action_features(self) -> dict[str, ArraySpec]: ...

    def connect(self) -> None: ...

    def disconnect(self) -> None: ...

    def get_observation(self) -> dict[str, Any]: ...

    def send_action(self, action: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def action_vector(action: dict[str, np.ndarray], spec: ArraySpec) -> np.ndarray:
    """The "action" entry of a send_action argument, as float32, validated against `spec`."""
    if "action" not in action:
        raise KeyError(f"send_action: expected a dict with key 'action', got keys {sorted(action)}")
    return spec.validate(np.asarray(action["action"], np.float32))
