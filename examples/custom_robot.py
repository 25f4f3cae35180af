"""A custom robot under a policy server: a 7-joint arm with a gripper, written against robot_io's Robot interface.

    # the policy server: random weights of the arm's shape stand in for your policy (--checkpoint DIR)
    vlash serve --policy pi05-tiny --random-weights --state-dims 15 --action-dims 8
    python examples/custom_robot.py --server tcp://127.0.0.1:5555 --camera base_0_rgb=wrist

Across machines, serve with `--bind tcp://0.0.0.0:5555 --insecure` (or CurveZMQ keys: `vlash keys`, docs/PROTOCOL.md)
and give the GPU machine's address to --server.

The arm here is simulated (joints move toward their goal at a limited speed, in real time); replace the bodies
marked DRIVER with your robot's calls. Its state has more entries than its action: 7 joint positions, 7 joint
velocities and the gripper width (15) against 7 joint targets and a gripper target (8). `state_names` and
`action_names` tell the runner which state entries the action's joints are: it uses them for the hold before the
first chunk (the measured positions) and for vlash mode's future state (those entries rolled forward).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from robot_io import ArraySpec

JOINTS = [f"joint{i}" for i in range(1, 8)]
GRIPPER = "gripper.width"


class SevenJointArm:
    """robot_io's Robot interface (robot_io/robots/base.py): features, connect, get_observation, send_action."""

    state_names = [f"{j}.pos" for j in JOINTS] + [f"{j}.vel" for j in JOINTS] + [GRIPPER]
    action_names = [f"{j}.pos" for j in JOINTS] + [GRIPPER]
    # A streaming joint controller: it needs commands to keep coming, so the runner's stall watchdog re-sends the
    # hold from its own thread if the control loop stalls (position servos would set this True).
    holds_position = False

    def __init__(self, camera: str = "wrist", image_size: tuple[int, int] = (96, 128), max_speed: float = 1.0):
        self.camera, self.image_size, self.max_speed = camera, image_size, max_speed  # rad/s
        self.joint_limits = np.array([[-2.8, 2.8]] * 7 + [[0.0, 0.08]], np.float32)  # [8, 2]; the runner clamps
        self.positions = np.zeros(8, np.float32)  # 7 joints (rad) + gripper width (m)
        self.velocities = np.zeros(7, np.float32)
        self.goal = self.positions.copy()
        self._last = 0.0

    @property
    def observation_features(self) -> dict[str, ArraySpec]:
        return {
            "state": ArraySpec("state", (len(self.state_names),), "float32"),
            f"images.{self.camera}": ArraySpec(self.camera, (*self.image_size, 3), "uint8"),
        }

    @property
    def action_features(self) -> dict[str, ArraySpec]:
        return {"action": ArraySpec("action", (len(self.action_names),), "float32")}

    def connect(self) -> None:  # DRIVER: open the connection, enable the controller
        self._last = time.monotonic()

    def disconnect(self) -> None:  # DRIVER: stop the controller, close the connection
        pass

    def get_observation(self) -> dict[str, Any]:
        stamp = time.time_ns()  # when the joints are read (a camera with frame times would give the older one)
        self._move()  # DRIVER: read the joint positions and velocities, the gripper width, the camera frame
        state = np.concatenate([self.positions[:7], self.velocities, self.positions[7:]]).astype(np.float32)
        return {"state": state, "images": {self.camera: self._render()}, "capture_time_ns": stamp}

    def send_action(self, action: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        target = np.asarray(action["action"], np.float32)
        self.goal = np.clip(target, self.joint_limits[:, 0], self.joint_limits[:, 1])  # DRIVER: send the goal
        return {"action": self.goal.copy()}  # what was really sent

    def _move(self) -> None:
        now = time.monotonic()
        dt, self._last = max(now - self._last, 1e-6), now
        step = np.clip(self.goal - self.positions, -self.max_speed * dt, self.max_speed * dt)
        self.velocities = (step[:7] / dt).astype(np.float32)
        self.positions = (self.positions + step).astype(np.float32)

    def _render(self) -> np.ndarray:
        h, w = self.image_size
        shade = int(127 + 120 * np.tanh(self.positions[0]))
        image = np.zeros((h, w, 3), np.uint8)
        image[:, : w // 2] = shade
        return image


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="tcp://127.0.0.1:5555", help="policy server endpoint")
    parser.add_argument("--camera", action="append", default=[], metavar="POLICY=ROBOT", help="camera map entry "
                        "(the arm's camera is 'wrist'; policy cameras not named are masked)")  # fmt: skip
    parser.add_argument(
        "--mode", default="vlash", help="chunk execution mode: sync, naive, vlash, prefix, rtc, faster, ensemble"
    )
    parser.add_argument("--duration-s", type=float, default=10.0, help="run length [s]")
    parser.add_argument("--max-step", type=float, default=0.05, help="largest joint change per tick (rad)")
    args = parser.parse_args(argv)

    from robot_io.camera_map import parse_camera_map
    from robot_io.client import PolicyClient
    from robot_io.executors import ExecutorConfig
    from robot_io.protocol.errors import RobotIOError
    from robot_io.run_summary import LABELS
    from robot_io.runner import RunConfig, run_robot
    from robot_io.server_wait import wait_for_server

    robot = SevenJointArm()
    try:
        with PolicyClient(args.server, timeout_s=10.0, client_name="examples/custom_robot") as client:
            # a server still loading its policy: wait up to 2 min (the arm is not connected yet), a line every 5 s
            metadata = wait_for_server(client, 120.0, lambda line: print(line, file=sys.stderr, flush=True))
            cameras = {c.name: None for c in metadata.cameras} | parse_camera_map(args.camera)
            executor = ExecutorConfig(mode=args.mode, execution_horizon=10)
            config = RunConfig(executor, duration_s=args.duration_s, max_step=args.max_step, camera_map=cameras)
            result = run_robot(robot, client, config, metadata=metadata)
    except (RobotIOError, ValueError) as exc:  # no server, dims or cameras that do not fit the policy
        print(f"custom_robot: error: {exc}", file=sys.stderr)
        return 2
    for field, label in LABELS.items():  # the rows of `vlash run`'s summary (docs/METHODS.md, "Run summary")
        print(f"{label:>28}: {result.summary.cell(field)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
