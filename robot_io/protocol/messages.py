"""The messages of the vlash wire protocol: one dataclass per message type, arrays as numpy.

Array fields hold numpy arrays. On decode they are read-only views of the received frames
(zero-copy); copy them before writing. See docs/PROTOCOL.md for the wire form of each field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from robot_io.protocol.errors import ProtocolError

PROTOCOL_VERSION = 2  # 2: final ACTIONS may be short (the early stop); delay_steps counts chunk indices
SCHEDULES = ("constant", "horizon-aware")  # flow-sampling schedules a request may ask for


class MessageType(StrEnum):
    """The `type` field of a header."""

    HELLO = "HELLO"
    METADATA = "METADATA"
    INFER = "INFER"
    ACTIONS = "ACTIONS"
    ERROR = "ERROR"
    PING = "PING"
    RESET = "RESET"
    STATS = "STATS"


class ErrorCode(StrEnum):
    """Why a message was refused or a request failed (the `code` of an ERROR message)."""

    BAD_MESSAGE = "BAD_MESSAGE"  # malformed or undecodable: framing, msgpack, header keys or types
    BAD_VERSION = "BAD_VERSION"  # header version is not PROTOCOL_VERSION
    BAD_VALUE = "BAD_VALUE"  # a field is out of bounds: dtype, shape, size, NaN/inf, unknown enum value
    UNKNOWN_CAMERA = "UNKNOWN_CAMERA"  # an image names a camera the policy does not have (or one is missing)
    DROPPED = "DROPPED"  # superseded by a newer request of the same client before it was served
    BUSY = "BUSY"  # the server cannot take the request now (queue full, shutting down)
    INTERNAL = "INTERNAL"  # the server failed while running the model


class MessageError(ProtocolError):
    """A message that cannot be decoded or encoded; `code` says why (sent back in an ERROR reply)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.detail = message


def bad_message(text: str) -> MessageError:
    """The sender does not speak the protocol: undecodable, a key missing or extra, a field of the wrong wire type."""
    return MessageError(ErrorCode.BAD_MESSAGE, text)


def bad_value(text: str) -> MessageError:
    """The right wire type, a value out of bounds."""
    return MessageError(ErrorCode.BAD_VALUE, text)


class RemoteError(ProtocolError):
    """The server answered with an ERROR message; carries its code, text and request id."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"server error {error.code.value}: {error.message}")
        self.code = error.code
        self.request_id = error.request_id
        self.error = error


@dataclass
class Hello:
    """Client -> server on connect; the reply is Metadata."""

    client: str = ""  # free-form client name for logs
    version: int = PROTOCOL_VERSION  # protocol version the client speaks


@dataclass
class CameraSpec:
    """One camera the policy expects: INFER images are uint8 [height, width, 3] under this name."""

    name: str
    height: int  # pixels
    width: int  # pixels


@dataclass
class Metadata:
    """Server -> client, the reply to Hello: what the policy expects and returns."""

    model_id: str
    cameras: list[CameraSpec]
    state_dim: int  # length of Infer.state (robot units)
    action_dim: int  # width of action chunks (robot's real action dims, not the model's padded 32)
    chunk_length: int  # actions per chunk (H)
    control_rate_hz: float  # control rate the policy was trained for (a hint)
    precision: str  # e.g. "bf16", "fp8"
    engine: str  # e.g. "torch", "tensorrt"
    num_steps: int  # denoise steps per request
    schedule: str  # default schedule: "constant" | "horizon-aware"
    relative_actions: bool  # whether the model predicts actions relative to the state (informative)
    version: int = PROTOCOL_VERSION


@dataclass
class Infer:
    """Client -> server: plan a chunk from this observation. Reply: a stream of Actions (or an Error)."""

    request_id: int  # chosen by the client, unique per connection; replies carry it
    step_index: int  # control step at which the observation was captured
    capture_time_ns: int  # wall clock (time.time_ns) at capture
    prompt: str  # task instruction
    images: dict[str, np.ndarray]  # camera name -> uint8 [H, W, 3]
    state: np.ndarray  # float32 [state_dim], robot units
    future_state: np.ndarray | None = None  # float32 [state_dim]; plan from this instead of `state`
    prefix: np.ndarray | None = None  # float32 [d, action_dim]: committed actions, returned bit-exact
    delay_steps: int = 0  # chunk indices the robot runs before this chunk takes over: d control steps * q
    schedule: str | None = None  # None: server default; else one of SCHEDULES
    guidance: np.ndarray | None = None  # float32 [n, action_dim]: previous chunk's leftover (guided RTC)
    # s, in chunk indices: actions executed after the prefix before the next chunk takes over (guided RTC's s;
    # with the horizon-aware schedule the final ACTIONS may then stop at row len(prefix) + s, see Actions)
    execution_horizon: int | None = None
    seed: int | None = None  # noise seed; None: server chooses


@dataclass
class Actions:
    """Server -> client: actions[start:start+n] of the chunk are final. The last message has final=True and
    carries rows [0, m) of the chunk plus the full timing breakdown: m = chunk_length, or 1 <= m < chunk_length
    when a horizon-aware request with an execution_horizon stopped sampling early; rows past m were never sampled
    (docs/PROTOCOL.md, ACTIONS)."""

    request_id: int
    start: int  # chunk index of actions[0]
    actions: np.ndarray  # float32 [n, action_dim], absolute robot units
    final: bool  # True on the last message of a request
    chunk_length: int  # H
    step_index: int  # the request's step_index, echoed
    timing_ms: dict[str, float] = field(default_factory=dict)  # queue_ms, preprocess_ms, prefill_ms, step_0_ms...


@dataclass
class Error:
    """Server -> client: a request or message was refused or failed."""

    code: ErrorCode
    message: str
    request_id: int | None = None  # the request it concerns, when known


@dataclass
class Ping:
    """Either way: the reply echoes sent_ns and fills server_ns (wall clock, time.time_ns)."""

    sent_ns: int
    server_ns: int | None = None


@dataclass
class Reset:
    """Client -> server: forget this client's pending work. The reply is Reset()."""


@dataclass
class Stats:
    """Client -> server with no counters; the reply carries served, dropped, errors, clients, latency..."""

    counters: dict[str, int | float] = field(default_factory=dict)


Message = Hello | Metadata | Infer | Actions | Error | Ping | Reset | Stats

MESSAGE_TYPES: dict[type, MessageType] = {
    Hello: MessageType.HELLO,
    Metadata: MessageType.METADATA,
    Infer: MessageType.INFER,
    Actions: MessageType.ACTIONS,
    Error: MessageType.ERROR,
    Ping: MessageType.PING,
    Reset: MessageType.RESET,
    Stats: MessageType.STATS,
}
