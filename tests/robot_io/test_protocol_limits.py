"""decode's bounds on hostile input: header nesting, the whole message's size; `receive` reads a message past the
limits to its end without keeping it."""

from __future__ import annotations

import weakref

import msgpack
import numpy as np
import pytest
import zmq

from robot_io.protocol import (
    PROTOCOL_VERSION,
    CameraSpec,
    ErrorCode,
    Infer,
    Limits,
    MessageError,
    Metadata,
    OversizedMessage,
    decode,
    encode,
    receive,
)
from robot_io.protocol.codec import MAX_HEADER_DEPTH


def nested(depth: int) -> bytes:
    """msgpack for a list nested `depth` deep around a 0."""
    return b"\x91" * depth + b"\x00"


def header(type_bytes: bytes = b"\xa4PING", body: bytes = b"\x82\xa7sent_ns\x01\xa9server_ns\xc0") -> bytes:
    return b"\x84\xa1v" + bytes([PROTOCOL_VERSION]) + b"\xa4type" + type_bytes + b"\xa4body" + body + b"\xa6arrays\x90"


def nested_in(where: str, depth: int) -> list[bytes]:
    """A PING header with a list nested `depth` deep as its type, a body value or a descriptor's dtype."""
    if where == "type":
        return [header(type_bytes=nested(depth))]
    if where == "body value":
        return [header(body=b"\x82\xa7sent_ns" + nested(depth) + b"\xa9server_ns\xc0")]
    return [header_with_dtype(nested(depth)), np.zeros(2, np.float32).tobytes()]


@pytest.mark.parametrize("depth", [MAX_HEADER_DEPTH, 100])
@pytest.mark.parametrize(
    ("where", "code", "text"),
    [
        ("type", ErrorCode.BAD_MESSAGE, "header.type: expected str, got list"),
        ("body value", ErrorCode.BAD_MESSAGE, "PING.body.sent_ns: expected int, got list"),
        ("descriptor dtype", ErrorCode.BAD_MESSAGE, "header.arrays[0].dtype: expected str, got list"),
    ],
)
def test_nesting_deeper_than_a_valid_header_is_refused_by_the_field_it_is_in(where, depth, code, text):
    """Read no deeper than the field's type: a list where a str or an int goes, whatever it holds."""
    with pytest.raises(MessageError) as refused:
        decode(nested_in(where, depth))
    assert refused.value.code == code and text in refused.value.detail


FIELD_REFUSALS = {
    "type": "header.type: expected str, got list",
    "body value": "PING.body.sent_ns: expected int, got list",
    "descriptor dtype": "header.arrays[0].dtype: expected str, got list",
}


@pytest.mark.parametrize("depth", [1000, 1020, 60_000])
@pytest.mark.parametrize("where", list(FIELD_REFUSALS))
def test_nesting_deeper_than_the_decoder_reads_is_a_bad_message(where, depth):
    """Not RecursionError, whatever the depth. How deep msgspec reads before it stops depends on the Python (3.11
    stops before 1000 levels, 3.12 reads them): refused by the depth where it stops, else by the field's type."""
    with pytest.raises(MessageError) as refused:
        decode(nested_in(where, depth))
    text = str(refused.value)
    assert refused.value.code == ErrorCode.BAD_MESSAGE, text
    assert "nested deeper than the decoder reads" in text or (depth < 60_000 and FIELD_REFUSALS[where] in text), text


def test_a_wrongly_typed_type_or_dtype_is_named_by_its_type_only():
    with pytest.raises(MessageError, match="header.type: expected str, got list$"):
        decode([header(type_bytes=nested(1))])
    with pytest.raises(MessageError, match=r"header.arrays\[0\].dtype: expected str, got list$"):
        decode([header_with_dtype(nested(1)), np.zeros(2, np.float32).tobytes()])


def header_with_dtype(dtype: bytes) -> bytes:
    """A PING header with one array descriptor whose dtype is the msgpack `dtype`."""
    state = msgpack.packb({"name": "state", "dtype": "float32", "shape": [2]})
    return header()[: -len(b"\x90")] + b"\x91" + state.replace(b"\xa7float32", dtype)


def test_the_deepest_valid_headers_still_decode():
    metadata = Metadata("m", [CameraSpec("front", 4, 4)], 2, 2, 8, 50.0, "fp32", "torch", 2, "constant", False)
    assert decode(encode(metadata)).cameras[0].name == "front"  # header > body > cameras > camera
    infer = Infer(1, 0, 0, "p", {"front": np.zeros((4, 4, 3), np.uint8)}, np.zeros(2, np.float32))
    assert decode(encode(infer)).images["front"].shape == (4, 4, 3)  # header > arrays > descriptor > shape


def test_the_whole_message_is_bounded_not_only_each_frame():
    limits = Limits(max_frame_bytes=1 << 16, max_message_bytes=1 << 17)
    state = np.zeros(2, np.float32)
    frames = encode(Infer(1, 0, 0, "p", {}, state), limits)
    padding = [b"\x00" * (1 << 16)] * 2  # each frame within its bound, together over the total
    with pytest.raises(MessageError, match="limit on all frames together"):
        decode([*frames, *padding], limits)
    with pytest.raises(ValueError, match="max_message_bytes"):
        Limits(max_message_bytes=1024)  # below the header bound


@pytest.fixture
def pair():
    context = zmq.Context()
    sender, receiver = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
    sender.bind("inproc://receive-test")
    receiver.connect("inproc://receive-test")
    yield sender, receiver
    sender.close(linger=0)
    receiver.close(linger=0)
    context.term()


class RecordingSocket:
    """A socket whose received frames are tracked by weak references (to see which ones are still alive)."""

    def __init__(self, socket: zmq.Socket) -> None:
        self.socket, self.received = socket, []

    def recv(self, *args, **kwargs) -> zmq.Frame:
        frame = self.socket.recv(*args, **kwargs)
        self.received.append(weakref.ref(frame))
        return frame


@pytest.mark.parametrize(
    ("parts", "what"),
    [([b"x" * 10] * 40, "40 frames"), ([b"h", b"x" * 3000, b"x" * 3000], "6001 bytes")],
)
def test_receive_reads_a_message_past_the_limits_to_its_end_and_keeps_nothing(pair, parts, what):
    sender, receiver = pair
    limits = Limits(max_frames=32, max_header_bytes=1024, max_frame_bytes=4096, max_message_bytes=4096)
    sender.send_multipart(parts)
    sender.send_multipart([b"next", b"message"])
    recording = RecordingSocket(receiver)
    with pytest.raises(OversizedMessage, match=what) as refused:
        receive(recording, limits)
    assert refused.value.code == ErrorCode.BAD_MESSAGE and refused.value.envelope == []
    assert len(recording.received) == len(parts)  # read to its end: the next message is intact
    # no frame is alive, not even through the exception's traceback: each was released as it was read
    assert [ref() for ref in recording.received] == [None] * len(parts)
    assert [f.bytes for f in receive(receiver, limits)] == [b"next", b"message"]


def test_receive_keeps_the_routing_envelope_out_of_the_count():
    context = zmq.Context()
    router, dealer = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
    try:
        router.bind("inproc://receive-envelope")
        dealer.connect("inproc://receive-envelope")
        limits = Limits(max_frames=18, max_images=16)
        dealer.send_multipart([b"a"] * 18)  # exactly the limit once the ROUTER's identity frame is not counted
        identity, *frames = receive(router, limits, envelope=1)
        assert len(frames) == 18 and identity.bytes
        dealer.send_multipart([b"a"] * 19)
        with pytest.raises(OversizedMessage) as refused:
            receive(router, limits, envelope=1)
        assert refused.value.envelope == [identity.bytes]
    finally:
        router.close(linger=0)
        dealer.close(linger=0)
        context.term()
