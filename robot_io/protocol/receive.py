"""Receiving one message from a ZeroMQ socket within `Limits`, part by part.

libzmq hands a multipart message over only once all of its frames have arrived, and bounds neither their
count nor their total size (ZMQ_MAXMSGSIZE, which `bound_socket` sets, applies to each frame alone). So by
the time a message can be read, libzmq holds all of it; what the receiver controls is what it keeps. `receive`
reads the frames one at a time and, once a message has more frames or bytes than the limits allow, releases
every further frame as soon as it is read; the caller gets an `OversizedMessage` and holds nothing. See
docs/PROTOCOL.md, "Limits".
"""

from __future__ import annotations

import zmq

from robot_io.protocol.limits import Limits
from robot_io.protocol.messages import ErrorCode, MessageError


class OversizedMessage(MessageError):
    """A message past `Limits.max_frames` or `Limits.max_message_bytes`; read to its end and released.
    `envelope` holds the routing frames read before it (a ROUTER's peer identity), to address the reply."""

    def __init__(self, frames: int, size: int, limits: Limits, envelope: list[bytes]) -> None:
        super().__init__(
            ErrorCode.BAD_MESSAGE,
            f"message of {frames} frames, {size} bytes exceeds the limits "
            f"({limits.max_frames} frames, {limits.max_message_bytes} bytes)",
        )
        self.envelope = envelope


def bound_socket(socket: zmq.Socket, limits: Limits) -> None:
    """Make libzmq drop a peer that sends a frame larger than any frame `limits` accept (before buffering it)."""
    socket.setsockopt(zmq.MAXMSGSIZE, limits.largest_frame_bytes)


def receive(socket: zmq.Socket, limits: Limits, flags: int = 0, envelope: int = 0) -> list[zmq.Frame]:
    """The next message's frames (zmq.Frame, not copied), its first `envelope` frames included but not counted.

    Raises zmq.Again (with zmq.NOBLOCK, when nothing is waiting) or OversizedMessage. Only the first frame is
    waited for: libzmq delivers a message whole.
    """
    frame = socket.recv(flags, copy=False)
    kept: list[zmq.Frame] = []
    routing: list[bytes] = []
    index = count = size = 0
    oversized = False
    while True:
        if index < envelope:
            kept.append(frame)
        else:
            count, size = count + 1, size + len(frame)
            if not oversized and (count > limits.max_frames or size > limits.max_message_bytes):
                oversized, routing = True, [f.bytes for f in kept[:envelope]]
                kept.clear()  # release what was kept; every later frame is released as soon as it is read
            if not oversized:
                kept.append(frame)
        more = frame.more
        del frame  # this function's last reference to a dropped frame
        if not more:
            break
        frame, index = socket.recv(copy=False), index + 1
    if oversized:
        raise OversizedMessage(count, size, limits, routing)
    return kept
