"""Which fault names the refusal of a message with several (docs/PROTOCOL.md, "Error codes"): the version first,
whatever the rest holds; then the first fault the decoder meets, in the order the message is written: the header
(its descriptors included), then the body's fields as the sender wrote them, then the frame count and each array
frame, then the checks across fields. An in-process `check` writes the header as `encode` does, so it names the same
fault."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from robot_io.protocol import (
    Actions,
    CameraSpec,
    ErrorCode,
    Infer,
    Limits,
    MessageError,
    Metadata,
    check,
    decode,
    encode,
)

INFER = Infer(1, 2, 3, "go", {"cam": np.zeros((4, 5, 3), np.uint8)}, np.zeros(6, np.float32))
ACTIONS = Actions(1, 0, np.ones((2, 2), np.float32), True, 2, 0)
CAMERAS = [CameraSpec("a", 4, 4), CameraSpec("b", 4, 4)]
METADATA = Metadata("m", CAMERAS, 2, 2, 8, 50.0, "fp32", "t", 2, "constant", False)


def refusal(frames: list, limits: Limits | None = None) -> MessageError:
    with pytest.raises(MessageError) as refused:
        decode(frames, limits or Limits())
    return refused.value


def with_body(message, reverse: bool = False, **changes) -> list:
    frames = [bytes(f) for f in encode(message)]
    header = msgpack.unpackb(frames[0])
    body = header["body"] | changes
    header["body"] = dict(reversed(body.items())) if reverse else body
    return [msgpack.packb(header), *frames[1:]]


@pytest.mark.parametrize("reverse", [False, True])
def test_the_first_fault_as_written_names_the_refusal(reverse):
    """request_id out of range (BAD_VALUE), seed of the wrong type (BAD_MESSAGE): whichever the sender wrote first."""
    refused = refusal(with_body(INFER, reverse, request_id=-1, seed="x"))
    first = ("seed", ErrorCode.BAD_MESSAGE) if reverse else ("request_id", ErrorCode.BAD_VALUE)
    assert refused.code is first[1] and f"INFER.body.{first[0]}:" in str(refused)


def test_check_names_the_fault_decode_names_in_an_encoded_message():
    bad = Infer(-1, 2, 3, "go", {"cam": np.zeros((4, 5, 3), np.uint8)}, np.zeros(6, np.float32), seed=-2)
    with pytest.raises(MessageError) as checked:
        check(bad)
    assert str(checked.value) == "BAD_VALUE: INFER.body.request_id: expected int >= 0"
    assert str(refusal(with_body(INFER, request_id=-1, seed=-2))) == str(checked.value)


def test_a_receivers_limit_is_a_bad_value_named_by_its_field():
    refused = refusal(with_body(INFER, delay_steps=9), Limits(max_chunk_length=8))
    assert str(refused) == "BAD_VALUE: INFER.body.delay_steps: expected int <= 8"


def test_a_list_is_refused_for_its_length_before_its_items():
    cameras = [{"name": "a", "height": 4, "width": 4}, "not a camera"]
    refused = refusal(with_body(METADATA, cameras=cameras), Limits(max_images=1, max_frames=3))
    assert str(refused) == "BAD_VALUE: METADATA.body.cameras: expected list of length <= 1"


def test_duplicate_cameras_are_refused_once_the_body_decodes():
    refused = refusal(with_body(METADATA, cameras=[{"name": "a", "height": 4, "width": 4}] * 2))
    assert refused.code is ErrorCode.BAD_VALUE and "METADATA.body.cameras: duplicate camera names" in str(refused)
    with pytest.raises(MessageError, match="duplicate camera") as refused:
        check(Metadata("m", [CameraSpec("a", 4, 4)] * 2, 2, 2, 8, 50.0, "fp32", "t", 2, "constant", False))
    assert refused.value.code is ErrorCode.BAD_VALUE


def test_the_header_and_its_descriptors_come_before_the_body_and_the_body_before_the_frames():
    frames = [bytes(f) for f in encode(INFER)]
    header = msgpack.unpackb(frames[0])
    header["body"]["seed"] = "x"
    header["arrays"][1]["dtype"] = "float64"
    refused = refusal([msgpack.packb(header), *frames[1:]])
    assert str(refused) == "BAD_VALUE: header.arrays[1].dtype: invalid enum value 'float64'"
    header["arrays"][1]["dtype"] = "uint8"
    refused = refusal([msgpack.packb(header), *frames[1:-1]])  # a frame missing, after the body's fault
    assert str(refused) == "BAD_MESSAGE: INFER.body.seed: expected int | null, got str"
    header["body"]["seed"] = None
    refused = refusal([msgpack.packb(header), *frames[1:-1]])
    assert refused.code is ErrorCode.BAD_MESSAGE and "descriptors" in str(refused)
    header["arrays"][0]["shape"] = [7]  # the state's frame does not match its descriptor: before the image's frame
    refused = refusal([msgpack.packb(header), *frames[1:2], b"", *frames[3:]])
    assert refused.code is ErrorCode.BAD_MESSAGE and "state: descriptor float32[7] does not match" in str(refused)


def test_the_version_is_checked_before_anything_else_in_the_header():
    frames = [bytes(f) for f in encode(INFER)]
    header = msgpack.unpackb(frames[0])
    header |= {"v": 3, "extra": 1}
    header["body"]["seed"] = "x"
    header["arrays"][0]["dtype"] = 5
    assert refusal([msgpack.packb(header), *frames[1:]]).code is ErrorCode.BAD_VERSION
    header["body"]["nested"] = {1: "an int key"}  # inside the body: read after the version
    assert refusal([msgpack.packb(header), *frames[1:]]).code is ErrorCode.BAD_VERSION
    header.update({f"k{i}": i for i in range(100)})  # however many entries the header holds
    assert refusal([msgpack.packb(header), *frames[1:]]).code is ErrorCode.BAD_VERSION
    header[1] = "an int key"  # in the header map itself: it is not a map of str keys, before the version
    refused = refusal([msgpack.packb(header), *frames[1:]])
    assert str(refused) == "BAD_MESSAGE: header key: expected str, got int"
    del header[1]
    header["v"] = "2"
    assert str(refusal([msgpack.packb(header), *frames[1:]])) == "BAD_MESSAGE: header: missing or non-int version 'v'"
