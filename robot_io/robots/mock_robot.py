"""A mock arm shaped like the policy it is driven by (`vlash run --robot mock`): a policy server, its checkpoint and
the control loop tried end to end before a real robot is plugged in.

Its state, action and cameras are the policy's (the server's METADATA): the first action_dim state entries are the
joints, any further ones are measurements that stay 0. The joints move toward their goal at a limited speed, in
real time, and hold their last goal (as position servos do); each camera shows a gradient that shifts with the
first joint, so the images change as the arm moves.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from robot_io.protocol import Metadata
from robot_io.specs import ArraySpec

MAX_SPEED = 1.0  # joint units per second


class MockRobot:
    """robot_io's Robot interface (robot_io/robots/base.py) over a simulated position-servoed arm."""

    holds_position = True  # a servo keeps its last goal: the runner needs no stall watchdog

    def __init__(self, state_dim: int, action_dim: int, cameras: dict[str, tuple[int, int]]) -> None:
        if not 1 <= action_dim <= state_dim:
            raise ValueError(f"mock robot: needs 1 <= action_dim <= state_dim, got {action_dim} / {state_dim}")
        self.cameras = dict(cameras)
        self.state_names = [f"joint{i}.pos" for i in range(action_dim)]
        self.state_names += [f"sensor{i}" for i in range(state_dim - action_dim)]
        self.action_names = self.state_names[:action_dim]
        self.positions = np.zeros(action_dim, np.float32)
        self.goal = self.positions.copy()
        self._last = 0.0

    @classmethod
    def for_policy(cls, metadata: Metadata) -> MockRobot:
        """The mock arm of the policy the server described."""
        cameras = {c.name: (c.height, c.width) for c in metadata.cameras}
        return cls(metadata.state_dim, metadata.action_dim, cameras)

    @property
    def observation_features(self) -> dict[str, ArraySpec]:
        features = {"state": ArraySpec("state", (len(self.state_names),), "float32")}
        for name, (height, width) in self.cameras.items():
            features[f"images.{name}"] = ArraySpec(name, (height, width, 3), "uint8")
        return features

    @property
    def action_features(self) -> dict[str, ArraySpec]:
        return {"action": ArraySpec("action", (len(self.action_names),), "float32")}

    def connect(self) -> None:
        self._last = time.monotonic()

    def disconnect(self) -> None:
        pass

    def get_observation(self) -> dict[str, Any]:
        stamp = time.time_ns()
        self._move()
        state = np.zeros(len(self.state_names), np.float32)
        state[: len(self.positions)] = self.positions
        images = {name: self._render(height, width) for name, (height, width) in self.cameras.items()}
        return {"state": state, "images": images, "capture_time_ns": stamp}

    def send_action(self, action: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.goal = np.asarray(action["action"], np.float32).copy()
        return {"action": self.goal.copy()}

    def _move(self) -> None:
        now = time.monotonic()
        dt, self._last = max(now - self._last, 0.0), now
        self.positions = self.positions + np.clip(self.goal - self.positions, -MAX_SPEED * dt, MAX_SPEED * dt)

    def _render(self, height: int, width: int) -> np.ndarray:
        shift = float(np.tanh(self.positions[0])) if len(self.positions) else 0.0
        ramp = (np.linspace(0.0, 1.0, width) + 0.25 * shift) % 1.0
        image = np.empty((height, width, 3), np.uint8)
        image[...] = (ramp * 255).astype(np.uint8)[None, :, None]
        return image
