"""The Robot interface the runner drives (LeRobot-like, with the state and images as arrays).

    robot.observation_features  # {"state": ArraySpec [S] float32, "images.<cam>": ArraySpec [H, W, 3] uint8}
    robot.action_features       # {"action": ArraySpec [A] float32}
    robot.connect(); obs = robot.get_observation(); sent = robot.send_action({"action": a}); robot.disconnect()

An observation is a dict: "state" float32 [S], "images" {camera: uint8 [H, W, 3]}, "capture_time_ns" (wall
clock, time.time_ns, it crosses machines: when the state and images were read, not when the dict was built) and
optionally "prompt" (task instruction of simulated tasks) and "episode_start" (True on the first observation of a
new episode: the runner then drops chunks in flight). `send_action` returns the action really sent (after the
robot's own clipping), as a dict like its argument.

The state may have more entries than the action (S != A: velocities, forces, a gripper width next to the joint
targets). Optional members say how they relate, and how the robot behaves when commands stop:
    state_names, action_names  # lists of entry names: each action entry is the state entry of the same name
    hold_action(observation)   # the action that keeps the robot where it is now (float32 [A]) or None
    holds_position             # True: with no new command the robot stays put (position servos keep their last
                               # goal, a stepped simulator does not move); False/absent: the runner's stall
                               # watchdog re-commands the hold from its own thread when the loop stalls
    after_disconnect           # None/absent: once disconnected it goes on as the last command left it; else what
                               # disconnect() leaves it doing instead, in words ("has its torque off ...: the arm
                               # ... may fall under gravity"), reported when a run is stopped
A robot that names nothing and has S == A is taken to command the joints its state measures, in order.
`disconnect()` releases whatever `connect()` got to, also after `connect()` raised part way, and does nothing for a
robot not connected (the runner calls it however the run ends).
With holds_position False, `send_action` may be called from the watchdog thread while the loop thread is blocked
elsewhere (in get_observation, say); two sends never overlap (the runner serializes them).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from robot_io.protocol.errors import RobotIOError, ShapeError
from robot_io.specs import ArraySpec


class RobotConfigError(RobotIOError, ValueError):
    """A robot cannot be built from its spec or config (unknown type, bad field, missing extra); says how to fix it."""


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


def state_dim(robot: Robot) -> int:
    return int(robot.observation_features["state"].shape[0])


def action_dim(robot: Robot) -> int:
    return int(robot.action_features["action"].shape[0])


def robot_cameras(robot: Robot) -> list[str]:
    """The robot's camera names, from its "images.<cam>" observation features."""
    return [key.partition(".")[2] for key in robot.observation_features if key.startswith("images.")]


def action_state_index(robot: Robot) -> np.ndarray | None:
    """For each action entry, the index of the state entry that measures the same joint; None when unknown.

    From `state_names` / `action_names` when the robot gives them (every action name must be a state name, else
    ShapeError), else the identity when the dims are equal (see the module doc)."""
    states, actions = getattr(robot, "state_names", None), getattr(robot, "action_names", None)
    if states is not None and actions is not None:
        states, actions = list(states), list(actions)
        if len(states) != state_dim(robot) or len(actions) != action_dim(robot):
            raise ShapeError(f"{type(robot).__name__}: {len(states)} state names / {len(actions)} action names for "
                             f"state_dim {state_dim(robot)} / action_dim {action_dim(robot)}")  # fmt: skip
        missing = [name for name in actions if name not in states]
        if missing:
            return None
        return np.array([states.index(name) for name in actions], np.intp)
    if state_dim(robot) == action_dim(robot):
        return np.arange(action_dim(robot), dtype=np.intp)
    return None


def holds_position(robot: Robot) -> bool:
    """Whether the robot stays put by itself when commands stop (see the module doc); False when it does not say."""
    return bool(getattr(robot, "holds_position", False))
