"""Test stand-ins without a model: a torch-free policy server over real ZeroMQ (`LoopbackPolicyServer`) and planners
for it, and a robot with no dynamics (`PointArm`). `hold_planner` keeps a robot where it is.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from robot_io.protocol import Actions, CameraSpec, Error, ErrorCode, Infer, Metadata
from robot_io.specs import ArraySpec
from vlash.sim.policy_link import Planner


def hold_planner(chunk_length: int, state_index: Sequence[int] | None = None) -> Planner:
    """A planner whose chunks keep the robot where it is: every action is the state's action entries
    (`state_index`, None: the whole state), taken from future_state when the request has one."""

    def plan(infer: Infer) -> np.ndarray:
        state = np.asarray(infer.state if infer.future_state is None else infer.future_state, np.float32)
        action = state if state_index is None else state[np.asarray(state_index, np.intp)]
        return np.tile(action, (chunk_length, 1))

    return plan


class LoopbackPolicyServer:
    """A torch-free policy server on a ZeroMQ ROUTER socket in a thread (tests, demos of the robot side):
    HELLO -> `metadata`; INFER -> one final Actions computed by `plan(infer)`. Use as a context manager."""

    def __init__(self, endpoint: str, plan: Planner, metadata: Metadata) -> None:
        import threading

        import zmq

        self.endpoint, self.plan, self.metadata = endpoint, plan, metadata
        self.served = 0
        self.handshakes = 0  # HELLO messages answered
        self.requests: list[Infer] = []  # every request served, in order (arrays copied)
        self._zmq = zmq
        self._socket = zmq.Context.instance().socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(endpoint)  # "tcp://127.0.0.1:*" picks a free port
        self.endpoint = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="loopback-policy-server", daemon=True)

    def __enter__(self) -> LoopbackPolicyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._socket.close(linger=0)

    def _serve(self) -> None:
        from robot_io.protocol import Hello, decode, encode

        while not self._stop.is_set():
            if not self._socket.poll(20):
                continue
            identity, *frames = self._socket.recv_multipart()
            message = decode(frames)
            if isinstance(message, Hello):
                self.handshakes += 1
                reply = self.metadata
            elif isinstance(message, Infer):
                self.requests.append(copy.deepcopy(message))
                chunk = np.asarray(self.plan(message), np.float32)
                if message.prefix is not None and len(message.prefix):
                    chunk[: len(message.prefix)] = message.prefix
                reply = Actions(message.request_id, 0, chunk, True, len(chunk), message.step_index, {"total_ms": 0.0})
                self.served += 1
            else:
                reply = Error(ErrorCode.BAD_MESSAGE, f"loopback server does not serve {type(message).__name__}")
            self._socket.send_multipart([identity, *encode(reply)])


class PointArm:
    """A robot with no dynamics: each command is reached at once (the state is the last command), one small black
    camera; it keeps nothing per tick, so a long run's memory is the runner's alone. Every `episode_steps`
    observations (None: never) a new episode starts: the arm jumps to another position and the observation says
    `episode_start`, as SimRobot's do."""

    holds_position = True  # like position servos: no stall watchdog thread in tests

    def __init__(self, joints: int = 2, camera: str = "cam", episode_steps: int | None = None) -> None:
        self.camera, self.episode_steps = camera, episode_steps
        self.state_names = self.action_names = [f"joint{j}" for j in range(joints)]
        self.pos = np.zeros(joints, np.float32)
        self.observations = 0
        self._image = np.zeros((4, 4, 3), np.uint8)

    @property
    def observation_features(self) -> dict[str, ArraySpec]:
        return {"state": ArraySpec("state", (len(self.pos),), "float32"),
                f"images.{self.camera}": ArraySpec(self.camera, (4, 4, 3), "uint8")}  # fmt: skip

    @property
    def action_features(self) -> dict[str, ArraySpec]:
        return {"action": ArraySpec("action", (len(self.pos),), "float32")}

    def connect(self) -> None:
        pass

    def disconnect(self) -> None:
        pass

    def get_observation(self) -> dict[str, Any]:
        self.observations += 1
        fresh = self.episode_steps is not None and self.observations % self.episode_steps == 1
        if fresh and self.observations > 1:
            self.pos = self.pos + 1.0  # the next episode starts elsewhere
        return {"state": self.pos.copy(), "images": {self.camera: self._image}, "capture_time_ns": 0,
                "episode_start": fresh}  # fmt: skip

    def send_action(self, action: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.pos = np.asarray(action["action"], np.float32).copy()
        return {"action": self.pos.copy()}


def point_metadata(joints: int = 2, chunk_length: int = 20, camera: str = "cam") -> Metadata:
    """Metadata of a policy for PointArm."""
    return Metadata("point", [CameraSpec(camera, 4, 4)], joints, joints, chunk_length, 30.0, "fp32", "fake", 1,
                    "constant", False)  # fmt: skip


def ramp_planner(chunk_length: int, step: float = 0.01) -> Planner:
    """Chunks that move every joint by `step` per index from the planning state (future_state when given): every
    action differs from the last, so a trace shows which chunk index ran when."""

    def plan(infer: Infer) -> np.ndarray:
        start = np.asarray(infer.state if infer.future_state is None else infer.future_state, np.float32)
        return start + step * np.arange(1, chunk_length + 1, dtype=np.float32)[:, None]

    return plan
