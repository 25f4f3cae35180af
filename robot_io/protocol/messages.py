"""The messages of the vlash wire protocol, each declared once: a msgspec Struct per message type, every field with its
type and its bounds. The codec, the receiver's bounds, the refusals and the server's request all derive from these
declarations (wire.py builds the header types a receiver decodes into, arrays.py the array frames' checks); a new field
is one line here and its row in docs/PROTOCOL.md.

A field's bounds are in its annotation: `Meta` where they are fixed, `Bound` where the receiver's `Limits` set them
(a str names a Limits attribute), `ArrayField` for a field sent as array frames rather than in the header's body,
`Unique` for a list whose items differ in one key. A body travels in the order its fields are declared here.
Array fields hold numpy arrays; on decode, read-only views of the received frames (zero-copy): copy before writing.
"""

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Literal

import numpy as np
from msgspec import Meta, Struct

from robot_io.protocol.errors import ProtocolError

PROTOCOL_VERSION = 2  # 2: final ACTIONS may be short (the early stop); delay_steps counts chunk indices
SCHEDULES = ("constant", "horizon-aware")  # flow-sampling schedules a request may ask for
# the latency augmentations a policy can be trained with (vlash train; docs/METHODS.md, "Execution modes")
TRAINED_WITH = ("future-state", "prefix", "horizon-aware")
INT64_MAX = 2**63 - 1
FLOAT_MAX = 1.7976931348623157e308  # the largest finite float: NaN and +-inf are outside [-FLOAT_MAX, FLOAT_MAX]


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


@dataclass(frozen=True)
class Bound:
    """Bounds a receiver's Limits set: msgspec.Meta's, each an int or the name of a Limits attribute."""

    ge: int | str | None = None
    le: int | str | None = None
    max_length: int | str | None = None

    def meta(self, limits: object) -> Meta:
        """These bounds as a receiver with `limits` (a Limits) sets them."""
        bounds = {"ge": self.ge, "le": self.le, "max_length": self.max_length}.items()
        return Meta(**{key: getattr(limits, v) if isinstance(v, str) else v for key, v in bounds if v is not None})


@dataclass(frozen=True)
class ArrayField:
    """A field sent as array frames: its wire dtype and each axis' [low, high] size (a str names a Limits attribute).
    With `key`, the field is a dict of arrays by `key` name (at most Limits' `max_count`, names not empty), each
    array sent as "<prefix><name>" (INFER's images: "image/<camera>")."""

    dtype: Literal["uint8", "float32"]
    dims: tuple[tuple[int, int | str], ...]
    key: str | None = None
    prefix: str = ""
    max_count: str = ""


@dataclass(frozen=True)
class Unique:
    """A list whose items differ in `key` (else BAD_VALUE: "duplicate <what>"): the one bound no msgspec type says."""

    key: str
    what: str


UInt = Annotated[int, Meta(ge=0, le=INT64_MAX)]  # request ids, step indices, wall-clock ns, seeds
Int64 = Annotated[int, Meta(ge=-INT64_MAX - 1, le=INT64_MAX)]
Finite = Annotated[float, Meta(ge=-FLOAT_MAX, le=FLOAT_MAX)]  # an int is accepted (as a float)
Version = Annotated[int, Meta(ge=0, le=2**31 - 1)]
Name = Annotated[str, Meta(max_length=256)]
Short = Annotated[str, Meta(max_length=64)]
Text = Annotated[str, Bound(max_length="max_prompt_chars")]  # a prompt and other free text
Index = Annotated[int, Bound(ge=0, le="max_chunk_length")]  # a row of a chunk, or a count of rows
Length = Annotated[int, Bound(ge=1, le="max_chunk_length")]
Side = Annotated[int, Bound(ge=1, le="max_image_side")]  # pixels
Schedule = Literal[SCHEDULES]
TrainedWith = Literal[TRAINED_WITH]
Key = Annotated[str, Meta(max_length=64)]  # keys of timing_ms and counters
MAX_MAP_ENTRIES = 256  # entries of timing_ms and counters
VECTOR = ArrayField("float32", ((1, "max_state_dim"),))
ROWS = ArrayField("float32", ((0, "max_chunk_length"), (1, "max_action_dim")))
IMAGES = ArrayField("uint8", ((1, "max_image_side"), (1, "max_image_side"), (3, 3)), "camera", "image/", "max_images")


class Hello(Struct):
    """Client -> server on connect; the reply is Metadata."""

    client: Name = ""  # free-form client name for logs
    version: Version = PROTOCOL_VERSION  # protocol version the client speaks


class CameraSpec(Struct):
    """One camera the policy expects: INFER images are uint8 [height, width, 3] under this name."""

    name: Name
    height: Side  # pixels
    width: Side  # pixels


class Metadata(Struct):
    """Server -> client, the reply to Hello: what the policy expects and returns."""

    model_id: Text
    cameras: Annotated[list[CameraSpec], Bound(max_length="max_images"), Unique("name", "camera names")]
    state_dim: Annotated[int, Bound(ge=1, le="max_state_dim")]  # length of Infer.state (robot units)
    # width of action chunks (robot's real action dims, not the model's padded 32)
    action_dim: Annotated[int, Bound(ge=1, le="max_action_dim")]
    chunk_length: Length  # actions per chunk (H)
    control_rate_hz: Annotated[float, Meta(ge=1e-3, le=1e5)]  # control rate the policy was trained for (a hint)
    precision: Short  # e.g. "bf16", "fp8"
    engine: Short  # e.g. "torch", "tensorrt"
    num_steps: Length  # denoise steps per request
    schedule: Schedule  # default schedule: "constant" | "horizon-aware"
    relative_actions: bool  # whether the model predicts actions relative to the state (informative)
    version: Version = PROTOCOL_VERSION
    # the latency augmentations the policy was trained with; None: its checkpoint does not say (not vlash-trained)
    trained_with: Annotated[list[TrainedWith], Meta(max_length=len(TRAINED_WITH))] | None = None


class Infer(Struct):
    """Client -> server: plan a chunk from this observation. Reply: a stream of Actions (or an Error)."""

    request_id: UInt  # chosen by the client, unique per connection; replies carry it
    step_index: UInt  # control step at which the observation was captured
    capture_time_ns: UInt  # wall clock (time.time_ns) at capture
    prompt: Text  # task instruction
    images: Annotated[dict[str, np.ndarray], IMAGES]  # camera name -> uint8 [H, W, 3]
    state: Annotated[np.ndarray, VECTOR]  # float32 [state_dim], robot units
    future_state: Annotated[np.ndarray | None, VECTOR] = None  # float32 [state_dim]; plan from this, not `state`
    prefix: Annotated[np.ndarray | None, ROWS] = None  # float32 [d, action_dim]: committed actions, returned bit-exact
    delay_steps: Index = 0  # chunk indices the robot runs before this chunk takes over: d control steps * q
    schedule: Schedule | None = None  # None: server default; else one of SCHEDULES
    guidance: Annotated[np.ndarray | None, ROWS] = None  # float32 [n, action_dim]: previous chunk's leftover
    # s, in chunk indices: actions executed after the prefix before the next chunk takes over (guided RTC's s;
    # with the horizon-aware schedule the final ACTIONS may then stop at row len(prefix) + s, see Actions)
    execution_horizon: Index | None = None
    seed: UInt | None = None  # noise seed; None: server chooses


class Actions(Struct):
    """Server -> client: actions[start:start+n] of the chunk are final. The last message has final=True and
    carries rows [0, m) of the chunk plus the full timing breakdown: m = chunk_length, or 1 <= m < chunk_length
    when a horizon-aware request with an execution_horizon stopped sampling early; rows past m were never sampled
    (docs/PROTOCOL.md, ACTIONS)."""

    request_id: UInt
    start: Index  # chunk index of actions[0]
    actions: Annotated[np.ndarray, ROWS]  # float32 [n, action_dim], absolute robot units
    final: bool  # True on the last message of a request
    chunk_length: Length  # H
    step_index: UInt  # the request's step_index, echoed
    # queue_ms, preprocess_ms, prefill_ms, step_0_ms...
    timing_ms: Annotated[dict[Key, Finite], Meta(max_length=MAX_MAP_ENTRIES)] = {}


class Error(Struct):
    """Server -> client: a request or message was refused or failed."""

    code: ErrorCode
    message: Text
    request_id: UInt | None = None  # the request it concerns, when known


class Ping(Struct):
    """Either way: the reply echoes sent_ns and fills server_ns (wall clock, time.time_ns)."""

    sent_ns: UInt
    server_ns: UInt | None = None


class Reset(Struct):
    """Client -> server: forget this client's pending work. The reply is Reset()."""


class Stats(Struct):
    """Client -> server with no counters; the reply carries served, dropped, errors, clients, latency..."""

    counters: Annotated[dict[Key, Int64 | Finite], Meta(max_length=MAX_MAP_ENTRIES)] = {}  # ints stay ints


class RemoteError(ProtocolError):
    """The server answered with an ERROR message; carries its code, text and request id."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"server error {error.code.value}: {error.message}")
        self.code = error.code
        self.request_id = error.request_id
        self.error = error


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
