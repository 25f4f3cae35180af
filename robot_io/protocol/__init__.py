"""The vlash wire protocol: versioned messages as ZeroMQ multipart (msgpack header + raw array frames).

Both ends import it from here (the server never keeps its own copy). See docs/PROTOCOL.md.
"""

from robot_io.protocol.codec import check, decode, encode
from robot_io.protocol.curve import CurveClientKeys, generate_keypair, load_keypair, load_public_key
from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import (
    PROTOCOL_VERSION,
    SCHEDULES,
    TRAINED_WITH,
    Actions,
    CameraSpec,
    Error,
    ErrorCode,
    Hello,
    Infer,
    Message,
    MessageError,
    MessageType,
    Metadata,
    Ping,
    RemoteError,
    Reset,
    Stats,
)
from robot_io.protocol.receive import OversizedMessage, bound_socket, receive

__all__ = [
    "PROTOCOL_VERSION",
    "SCHEDULES",
    "TRAINED_WITH",
    "Actions",
    "CameraSpec",
    "CurveClientKeys",
    "Error",
    "ErrorCode",
    "Hello",
    "Infer",
    "Limits",
    "Message",
    "MessageError",
    "MessageType",
    "Metadata",
    "OversizedMessage",
    "Ping",
    "RemoteError",
    "Reset",
    "Stats",
    "bound_socket",
    "check",
    "decode",
    "encode",
    "generate_keypair",
    "load_keypair",
    "load_public_key",
    "receive",
]
