"""In-process stand-ins for tests and demos without a server: a fake policy client with scripted latency.

    clock = SimulatedClock()
    client = FakePolicyClient(expert_planner(sim_robot), sim_metadata(sim_robot), clock, latency_s=0.05)

FakePolicyClient satisfies the executors' PolicyLink (connect / submit / poll): a request's chunk is computed
at submit time by `plan(infer)` and its Actions become available `latency_s` later on `clock` (simulated or
real). `stream` lists partial messages as (fraction of the latency, number of new actions final), like the
horizon-aware sampler's streaming. A planner may instead return a PlannedChunk that says itself when each
message is due and how many rows its final message carries (vlash eval's timing model does). A newer request
drops the older one (Error DROPPED), as the server does.
`replying = False` makes it a dead server (requests swallowed) until set back.
LoopbackPolicyServer serves a planner over real ZeroMQ without torch; `hold_planner` keeps a robot where it is.
PointArm is a robot with no dynamics and no memory (long runs, episode resets on demand).
"""

from __future__ import annotations

import copy
import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_io.control.clock import Clock
from robot_io.protocol import Actions, CameraSpec, Error, ErrorCode, Infer, Metadata
from robot_io.specs import ArraySpec


@dataclass(frozen=True)
class PlannedChunk:
    """A planner's chunk with its own message timing, as fractions of the client's latency: partial messages
    (fraction, stop) make rows [.., stop) final; the final message at `final_fraction` carries rows [0, rows)."""

    actions: np.ndarray  # [H, J]
    pieces: tuple[tuple[float, int], ...] = ()  # (fraction of the latency, stop index), in time order
    rows: int | None = None  # rows of the final message (None: the whole chunk); fewer: sampling stopped early
    final_fraction: float = 1.0  # when the final message is due, as a fraction of the latency


Planner = Callable[[Infer], "np.ndarray | PlannedChunk"]


class FakePolicyClient:
    def __init__(
        self,
        plan: Planner,
        metadata: Metadata,
        clock: Clock,
        latency_s: float | Callable[[Infer], float] = 0.05,
        stream: Sequence[tuple[float, int]] = (),
        history: int | None = None,
    ) -> None:
        self.plan, self.metadata, self.clock, self.latency_s, self.stream = plan, metadata, clock, latency_s, stream
        # every request submitted, in order; with `history`, only the most recent (long runs)
        self.requests: list[Infer] | deque[Infer] = [] if history is None else deque(maxlen=history)
        self.replying = True  # False: requests are swallowed (a dead server)
        self.connects = 0
        self._queue: list[tuple[int, int, Actions | Error]] = []  # (due_ns, seq, message)
        self._seq = 0

    def connect(self) -> Metadata:
        self.connects += 1
        return self.metadata

    def submit(self, infer: Infer) -> None:
        self.requests.append(infer)
        now = self.clock.now_ns()
        older = {m.request_id for _, _, m in self._queue if isinstance(m, Actions)}
        self._queue = [item for item in self._queue if not isinstance(item[2], Actions)]
        for rid in sorted(older):
            self._push(now, Error(ErrorCode.DROPPED, "superseded by a newer request", rid))
        if not self.replying:
            return
        planned = self.plan(infer)
        h = self.metadata.chunk_length
        c = 0 if infer.prefix is None else len(infer.prefix)
        if not isinstance(planned, PlannedChunk):
            planned = PlannedChunk(planned, tuple((fraction, c + count) for fraction, count in self.stream))
        chunk = np.asarray(planned.actions, np.float32).copy()
        if chunk.shape != (h, self.metadata.action_dim):
            raise ValueError(
                f"FakePolicyClient: plan returned {chunk.shape}, expected ({h}, {self.metadata.action_dim})"
            )
        if c:
            chunk[:c] = infer.prefix  # committed actions come back bit-exact
        latency = self.latency_s(infer) if callable(self.latency_s) else self.latency_s
        rows = h if planned.rows is None else planned.rows
        done = c
        for fraction, stop in planned.pieces:
            stop = min(rows, stop)
            if stop > done:
                self._push(now + round(fraction * latency * 1e9), self._actions(infer, chunk, done, stop, False, {}))
                done = stop
        final_s = planned.final_fraction * latency
        self._push(now + round(final_s * 1e9), self._actions(infer, chunk, 0, rows, True, {"total_ms": final_s * 1e3}))

    def poll(self, timeout_s: float = 0.0) -> Actions | Error | None:
        deadline = self.clock.now_ns() + max(0, round(timeout_s * 1e9))
        if self._queue and self._queue[0][0] <= deadline:
            self.clock.sleep_until(self._queue[0][0])
            return heapq.heappop(self._queue)[2]
        self.clock.sleep_until(deadline)
        return None

    def reset(self) -> None:
        self._queue.clear()

    def close(self) -> None:
        self._queue.clear()

    def _actions(self, infer: Infer, chunk: np.ndarray, start: int, stop: int, final: bool, timing: dict) -> Actions:
        return Actions(infer.request_id, start, chunk[start:stop].copy(), final, len(chunk), infer.step_index, timing)

    def _push(self, due_ns: int, message: Actions | Error) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (due_ns, self._seq, message))


def expert_planner(robot: Any, chunk_length: int = 50) -> Planner:
    """The scripted-expert oracle (robot_io.oracle.ExpertPlanner, as `vlash eval --policy oracle`) of a connected
    SimRobot, without the privileged view of the running chunk (future-state requests get the measured velocity)."""
    from robot_io.oracle import ExpertPlanner

    return lambda infer: ExpertPlanner(robot.env, chunk_length)(infer)


def hold_planner(chunk_length: int, state_index: Sequence[int] | None = None) -> Planner:
    """A planner whose chunks keep the robot where it is: every action is the state's action entries
    (`state_index`, None: the whole state), taken from future_state when the request has one."""

    def plan(infer: Infer) -> np.ndarray:
        state = np.asarray(infer.state if infer.future_state is None else infer.future_state, np.float32)
        action = state if state_index is None else state[np.asarray(state_index, np.intp)]
        return np.tile(action, (chunk_length, 1))

    return plan


def sim_metadata(robot: Any, chunk_length: int = 50, rate_hz: float = 30.0) -> Metadata:
    """Metadata of an in-process policy for a connected SimRobot (its camera, its joints)."""
    s, j = robot.image_size, robot.env.num_joints
    return Metadata(
        model_id="scripted-expert",
        cameras=[CameraSpec(robot.camera, s, s)],
        state_dim=j,
        action_dim=j,
        chunk_length=chunk_length,
        control_rate_hz=rate_hz,
        precision="fp32",
        engine="in-process",
        num_steps=10,
        schedule="constant",
        relative_actions=False,
    )


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
