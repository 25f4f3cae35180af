"""A header with several faults gets the code of the first in the protocol's order (docs/PROTOCOL.md, "Error
codes"), whatever order its sender wrote the keys in: decode stops at the first bad element it reads, then names
the first fault in that order; an in-process `check` names the same one."""

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
def test_the_first_field_in_the_bodys_order_names_the_refusal(reverse):
    """request_id out of range (BAD_VALUE) comes before seed of the wrong type (BAD_MESSAGE), in either key order."""
    refused = refusal(with_body(INFER, reverse, request_id=-1, seed="x"))
    assert refused.code is ErrorCode.BAD_VALUE and "request_id" in str(refused)
    refused = refusal(with_body(INFER, reverse, request_id="x", seed=-1))
    assert refused.code is ErrorCode.BAD_MESSAGE and "request_id" in str(refused)


def test_a_receivers_limit_and_a_wrong_type_are_refused_in_field_order():
    """delay_steps past the receiver's max_chunk_length (a bound that depends on its Limits) is met first."""
    refused = refusal(with_body(INFER, delay_steps=9, seed="x"), Limits(max_chunk_length=8))
    assert refused.code is ErrorCode.BAD_VALUE and "delay_steps" in str(refused)


def test_a_list_is_refused_for_its_length_before_its_items():
    cameras = [{"name": "a", "height": 4, "width": 4}, "not a camera"]
    refused = refusal(with_body(METADATA, cameras=cameras), Limits(max_images=1, max_frames=3))
    assert refused.code is ErrorCode.BAD_VALUE and "cameras" in str(refused)


def test_duplicate_cameras_are_refused_before_the_fields_after_them():
    cameras = [{"name": "a", "height": 4, "width": 4}] * 2
    refused = refusal(with_body(METADATA, cameras=cameras, state_dim=None))
    assert refused.code is ErrorCode.BAD_VALUE and "duplicate camera" in str(refused)
    bad = Metadata("m", [CameraSpec("a", 4, 4)] * 2, None, 2, 8, 50.0, "fp32", "t", 2, "constant", False)
    with pytest.raises(MessageError, match="duplicate camera") as refused:
        check(bad)
    assert refused.value.code is ErrorCode.BAD_VALUE


def test_a_maps_keys_are_checked_before_its_values():
    """A key too long (BAD_VALUE) is met before an earlier entry's value of the wrong type (BAD_MESSAGE)."""
    refused = refusal(with_body(ACTIONS, timing_ms={"a": "x", "k" * 65: 1.0}))
    assert refused.code is ErrorCode.BAD_VALUE and "timing_ms key" in str(refused)


def test_the_descriptor_count_comes_before_the_descriptors_and_each_before_the_next_frame():
    frames = [bytes(f) for f in encode(INFER)]
    header = msgpack.unpackb(frames[0])
    header["arrays"][1]["dtype"] = "float64"  # BAD_VALUE, but a frame is missing (BAD_MESSAGE) first
    refused = refusal([msgpack.packb(header), *frames[1:-1]])
    assert refused.code is ErrorCode.BAD_MESSAGE and "descriptors" in str(refused)
    header["arrays"][0]["shape"] = [7]  # the state's frame does not match: before the image's dtype
    refused = refusal([msgpack.packb(header), *frames[1:]])
    assert refused.code is ErrorCode.BAD_MESSAGE and "does not match" in str(refused)


def test_the_version_is_checked_before_anything_else_in_the_header():
    frames = [bytes(f) for f in encode(INFER)]
    header = msgpack.unpackb(frames[0])
    header |= {"v": 3, "extra": 1}
    header["body"]["seed"] = "x"
    assert refusal([msgpack.packb(header), *frames[1:]]).code is ErrorCode.BAD_VERSION
    header["body"]["nested"] = {1: "an int key"}  # inside the body: the body's fault, read after the version
    assert refusal([msgpack.packb(header), *frames[1:]]).code is ErrorCode.BAD_VERSION
    header[1] = "an int key"  # in the header map itself: it is not a map of str keys, before the version
    refused = refusal([msgpack.packb(header), *frames[1:]])
    assert refused.code is ErrorCode.BAD_MESSAGE and "header: a map key that is not a str" in str(refused)
    header[0] = 2  # a header of more entries than any is listed by none: stepped over for its version alone
    header.update({f"k{i}": i for i in range(100)})
    refused = refusal([msgpack.packb(header), *frames[1:]])
    assert refused.code is ErrorCode.BAD_MESSAGE and "header: a map key that is not a str" in str(refused)
    del header[0], header[1]
    assert refusal([msgpack.packb(header), *frames[1:]]).code is ErrorCode.BAD_VERSION
    header["v"] = 2
    refused = refusal([msgpack.packb(header), *frames[1:]])
    assert refused.code is ErrorCode.BAD_MESSAGE and "got a map of 105 entries" in str(refused)
