"""Wire protocol: round trips, zero-copy decode, and that every bad field is refused with the right code."""

from __future__ import annotations

import re
from pathlib import Path

import msgpack
import numpy as np
import pytest

from robot_io.protocol import (
    Actions,
    CameraSpec,
    Error,
    ErrorCode,
    Hello,
    Infer,
    Limits,
    MessageError,
    Metadata,
    Ping,
    Reset,
    Stats,
    check,
    decode,
    encode,
)
from robot_io.protocol.errors import ProtocolError

METADATA = Metadata(
    "m", [CameraSpec("front", 6, 8), CameraSpec("wrist", 6, 8)], 4, 3, 10, 30.0, "bf16", "torch", 10, "constant", True
)


def make_infer(**overrides) -> Infer:
    fields = dict(
        request_id=7,
        step_index=42,
        capture_time_ns=1_700_000_000_000_000_000,
        prompt="pick the cube",
        images={"front": np.full((6, 8, 3), 9, np.uint8), "wrist": np.zeros((6, 8, 3), np.uint8)},
        state=np.arange(4, dtype=np.float32),
        future_state=np.ones(4, np.float32),
        prefix=np.zeros((2, 3), np.float32),
        delay_steps=2,
        schedule="horizon-aware",
        guidance=np.ones((5, 3), np.float32),
        execution_horizon=5,
        seed=3,
    )
    return Infer(**(fields | overrides))


def header_of(frames) -> dict:
    return msgpack.unpackb(frames[0])


def with_header(frames, **changes) -> list:
    return [msgpack.packb(header_of(frames) | changes), *frames[1:]]


def assert_refused(frames, code: ErrorCode, match: str = "", limits: Limits | None = None) -> None:
    with pytest.raises(MessageError, match=match) as info:
        decode(frames, limits or Limits())
    assert info.value.code is code and isinstance(info.value, ProtocolError)


SIMPLE = [
    Hello("arm"),
    METADATA,
    Error(ErrorCode.DROPPED, "superseded", 3),
    Error(ErrorCode.BAD_MESSAGE, "garbage"),
    Ping(5),
    Ping(5, 6),
    Reset(),
    Stats(),
    Stats({"served": 10, "p99_ms": 2.5}),
    Actions(1, 0, np.ones((10, 3), np.float32), True, 10, 4, {"total_ms": 3.0, "step_0_ms": 1.0}),
    Actions(1, 2, np.ones((1, 3), np.float32), False, 10, 4),
]


@pytest.mark.parametrize("message", SIMPLE, ids=lambda m: type(m).__name__)
def test_round_trip(message):
    decoded = decode(encode(message))
    assert type(decoded) is type(message)
    if isinstance(message, Actions):
        np.testing.assert_array_equal(decoded.actions, message.actions)
        assert (decoded.start, decoded.final, decoded.timing_ms) == (message.start, message.final, message.timing_ms)
    else:
        assert decoded == message


def test_infer_round_trip_is_bit_exact_and_zero_copy():
    infer = make_infer(prefix=np.array([[0.1, -2.5e-8, 3.4e38]] * 2, np.float32))
    frames = [bytes(f) for f in encode(infer)]  # as received from the network
    decoded = decode(frames)
    for name in ("state", "future_state", "prefix", "guidance"):
        assert getattr(decoded, name).tobytes() == getattr(infer, name).tobytes()
    assert decoded.images.keys() == infer.images.keys() and decoded.images["front"][0, 0, 0] == 9
    assert not decoded.state.flags.writeable  # a view of the immutable frame, not a copy
    assert np.shares_memory(decoded.images["front"], np.frombuffer(frames[-2], np.uint8))
    assert (decoded.schedule, decoded.seed, decoded.delay_steps) == ("horizon-aware", 3, 2)


def test_optional_arrays_may_be_absent_and_empty():
    decoded = decode(encode(make_infer(future_state=None, guidance=None, prefix=np.zeros((0, 3), np.float32))))
    assert decoded.future_state is None and decoded.guidance is None and decoded.prefix.shape == (0, 3)


def test_empty_arrays_travel_as_empty_frames():
    frames = encode(make_infer(prefix=np.zeros((0, 3), np.float32), future_state=None, guidance=None))
    descriptors = [d["name"] for d in header_of(frames)["arrays"]]
    assert memoryview(frames[1 + descriptors.index("prefix")]).nbytes == 0
    prefix = decode([bytes(f) for f in frames]).prefix
    assert prefix.shape == (0, 3) and prefix.dtype == np.float32


def test_received_float_arrays_are_checked_for_nan_and_inf():
    """The receiver checks every float array itself, whatever the sender checked (here: nothing)."""
    for bad in (np.nan, np.inf, -np.inf):
        chunk = np.ones((10, 3), np.float32)
        chunk[9, 2] = bad
        frames = encode(Actions(1, 0, chunk, True, 10, 4))
        assert_refused(frames, ErrorCode.BAD_VALUE, "actions: contains NaN or inf")
        guidance = np.ones((5, 3), np.float32)
        guidance[0, 0] = bad
        assert_refused(encode(make_infer(guidance=guidance)), ErrorCode.BAD_VALUE, "guidance: contains")


def test_array_bounds_follow_the_receivers_limits():
    """Bounds are resolved once per (message type, Limits): each decode still checks against its own Limits."""
    frames = [bytes(f) for f in encode(make_infer())]
    decode(frames)
    assert_refused(frames, ErrorCode.BAD_VALUE, "state: size 4 of axis 0 out of range", Limits(max_state_dim=3))
    assert_refused(frames, ErrorCode.BAD_VALUE, "prefix: size 3 of axis 1", Limits(max_action_dim=2))
    assert_refused(frames, ErrorCode.BAD_VALUE, "image/front: size 8 of axis 1", Limits(max_image_side=7))
    decode(frames, Limits())  # an equal Limits: accepted again


def test_declared_bounds_follow_the_receivers_limits_in_nested_structs_and_text():
    """A bound declared as a Limits attribute (messages.py, `Bound`) is the receiver's, wherever the field is: a
    METADATA camera's side, a prompt's length; and a decoded camera is the declared CameraSpec."""
    frames = [bytes(f) for f in encode(METADATA)]
    assert decode(frames).cameras == METADATA.cameras and type(decode(frames).cameras[0]) is CameraSpec
    side = r"METADATA.body.cameras\[0\].height: expected int <= 5"
    assert_refused(frames, ErrorCode.BAD_VALUE, side, Limits(max_image_side=5))
    prompt = r"INFER.body.prompt: expected str of length <= 12"
    assert_refused(encode(make_infer()), ErrorCode.BAD_VALUE, prompt, Limits(max_prompt_chars=12))


def test_arrays_a_message_type_does_not_carry_are_refused():
    image = np.zeros((2, 2, 3), np.uint8)
    actions = encode(Actions(1, 0, np.ones((10, 3), np.float32), True, 10, 4))
    header = header_of(actions)
    header["arrays"].append({"name": "image/front", "dtype": "uint8", "shape": [2, 2, 3]})
    assert_refused([msgpack.packb(header), *actions[1:], image.tobytes()], ErrorCode.BAD_MESSAGE, "unexpected array")
    ping = header_of(encode(Ping(5))) | {"arrays": [{"name": "state", "dtype": "float32", "shape": [1]}]}
    assert_refused([msgpack.packb(ping), bytes(4)], ErrorCode.BAD_MESSAGE, "PING: unexpected array 'state'")


def test_big_endian_arrays_are_sent_little_endian():
    frames = encode(make_infer(state=np.arange(4, dtype=">f4")))
    assert decode(frames).state.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("change", "code", "match"),
    [
        ({"v": 1}, ErrorCode.BAD_VERSION, "version 1"),
        ({"v": "1"}, ErrorCode.BAD_MESSAGE, "version"),
        ({"type": "EXPLODE"}, ErrorCode.BAD_MESSAGE, "unknown message type"),
        ({"type": 5}, ErrorCode.BAD_MESSAGE, "header.type: expected str, got int"),
        ({"extra": 1}, ErrorCode.BAD_MESSAGE, r"header: 5 entries, expected 4 \(a key unknown or given twice\)"),
        ({"arrays": {}}, ErrorCode.BAD_MESSAGE, "header.arrays: expected list, got map"),
    ],
)
def test_bad_headers_are_refused(change, code, match):
    assert_refused(with_header(encode(make_infer()), **change), code, match)


@pytest.mark.parametrize(
    ("field", "value", "code", "match"),
    [
        ("request_id", -1, ErrorCode.BAD_VALUE, "request_id: expected int >= 0"),
        ("request_id", 1.0, ErrorCode.BAD_MESSAGE, "expected int"),
        ("request_id", True, ErrorCode.BAD_MESSAGE, "expected int"),
        ("prompt", "x" * 5000, ErrorCode.BAD_VALUE, "prompt: expected str of length <= 4096"),
        ("prompt", b"bytes", ErrorCode.BAD_MESSAGE, "expected str"),
        ("schedule", "fastest", ErrorCode.BAD_VALUE, "not one of"),
        ("delay_steps", 10**6, ErrorCode.BAD_VALUE, "delay_steps: expected int <= 4096"),
        ("seed", 2**64 - 1, ErrorCode.BAD_VALUE, "seed: expected int <= 9223372036854775807"),
    ],
)
def test_bad_body_fields_are_refused(field, value, code, match):
    frames = encode(make_infer())
    header = header_of(frames)
    header["body"][field] = value
    assert_refused([msgpack.packb(header), *frames[1:]], code, match)


def test_missing_body_field_is_refused():
    frames = encode(make_infer())
    header = header_of(frames)
    del header["body"]["seed"]
    assert_refused([msgpack.packb(header), *frames[1:]], ErrorCode.BAD_MESSAGE, "missing required field 'seed'")


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"state": np.zeros(4)}, "state: expected dtype float32, got float64"),
        ({"state": np.zeros((2, 2), np.float32)}, "state: expected 1 dims"),
        ({"state": np.array([0, np.nan, 0, 0], np.float32)}, "state: contains NaN or inf"),
        ({"prefix": np.full((2, 3), np.inf, np.float32)}, "prefix: contains NaN or inf"),
        ({"future_state": np.zeros(5, np.float32)}, "future_state: shape"),
        ({"guidance": np.zeros((5, 2), np.float32)}, "guidance: 2 action dims differ"),
        ({"images": {"front": np.zeros((6, 8, 4), np.uint8)}}, "axis 2 out of range"),
        ({"images": {"front": np.zeros((6, 8, 3), np.float32)}}, "expected dtype uint8"),
        ({"images": {"front": [[0]]}}, "expected numpy array"),
        ({"images": {"": np.zeros((6, 8, 3), np.uint8)}}, "non-empty camera names"),
        ({"images": {f"c{i}": np.zeros((1, 1, 3), np.uint8) for i in range(17)}}, "0..16 images"),
    ],
)
def test_bad_arrays_are_refused_on_receipt_at_a_validating_sender_and_in_process(overrides, match):
    message = make_infer(**overrides)
    with pytest.raises(MessageError, match=match):
        decode(encode(message))  # a type error raises from encode itself
    with pytest.raises(MessageError, match=match):
        encode(message, validate=True)
    with pytest.raises(MessageError, match=match):
        check(message)  # an in-process client's request, never encoded


def test_descriptor_must_match_its_frame():
    frames = encode(make_infer())
    header = header_of(frames)
    header["arrays"][0]["shape"] = [5]  # state is 4 floats = 16 bytes
    assert_refused([msgpack.packb(header), *frames[1:]], ErrorCode.BAD_MESSAGE, "does not match a 16-byte frame")
    assert_refused(frames[:-1], ErrorCode.BAD_MESSAGE, "descriptors")  # a frame missing
    assert_refused([*frames, b"extra"], ErrorCode.BAD_MESSAGE, "descriptors")


def test_size_limits_are_enforced_before_parsing():
    frames = encode(make_infer())
    assert_refused(frames, ErrorCode.BAD_MESSAGE, "exceed the limit 100", Limits(max_header_bytes=100))
    assert_refused(frames, ErrorCode.BAD_MESSAGE, "exceed the limit 64", Limits(max_frame_bytes=64))
    assert_refused(frames, ErrorCode.BAD_VALUE, "out of range", Limits(max_image_side=4))
    assert_refused([], ErrorCode.BAD_MESSAGE, "frames")
    assert_refused("not frames", ErrorCode.BAD_MESSAGE, "frames")
    assert_refused([object()], ErrorCode.BAD_MESSAGE, "not a buffer")


FINAL_ROWS = r"final ACTIONS must carry rows \[0, m\) with 1 <= m <= 10"


@pytest.mark.parametrize(
    ("start", "rows", "final", "match"),
    [
        (8, 3, False, "exceed chunk_length"),
        (3, 0, False, "at least one"),
        (2, 3, True, FINAL_ROWS),  # a final message starts at row 0
        (2, 8, True, FINAL_ROWS),  # ... even when it ends at the chunk's end
        (0, 0, True, FINAL_ROWS),  # and carries at least one row
        (0, 11, True, "exceed chunk_length"),  # and at most chunk_length
    ],
)
def test_actions_ranges_are_checked(start, rows, final, match):
    message = Actions(1, start, np.zeros((rows, 3), np.float32), final, 10, 0)
    with pytest.raises(MessageError, match=match):
        encode(message, validate=True)
    assert_refused(encode(message), ErrorCode.BAD_VALUE, match)  # refused on receipt


@pytest.mark.parametrize("rows", [1, 7, 10])
def test_a_final_actions_may_carry_fewer_rows_than_the_chunk(rows):
    """Rows [0, m) of a chunk whose sampling stopped early (a horizon-aware request with an execution horizon)."""
    actions = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    decoded = decode([bytes(f) for f in encode(Actions(1, 0, actions, True, 10, 4, {"total_ms": 2.0}))])
    assert (decoded.start, decoded.final, decoded.chunk_length) == (0, True, 10)
    assert decoded.actions.tobytes() == actions.tobytes()


def test_error_code_and_metadata_fields_are_checked():
    frames = encode(Error(ErrorCode.INTERNAL, "boom"))
    header = header_of(frames)
    header["body"]["code"] = "ON_FIRE"
    assert_refused([msgpack.packb(header)], ErrorCode.BAD_VALUE, "'ON_FIRE' is not one of")
    bad = Metadata(
        "m", [CameraSpec("a", 2, 2), CameraSpec("a", 2, 2)], 4, 3, 10, 30.0, "bf16", "t", 10, "constant", True
    )
    with pytest.raises(MessageError, match="duplicate camera"):
        check(bad)
    with pytest.raises(MessageError, match="control_rate_hz"):
        check(Metadata("m", [], 4, 3, 10, float("nan"), "bf16", "t", 10, "constant", True))
    with pytest.raises(MessageError, match="not a protocol message"):
        encode("hello")


def test_limits_validate_their_fields():
    with pytest.raises(ValueError, match="max_images"):
        Limits(max_images=0)
    with pytest.raises(ValueError, match="below 2 \\+ max_images"):
        Limits(max_frames=4, max_images=8)


def test_documented_header_bytes():
    """The worked example in docs/PROTOCOL.md is what encode produces, byte for byte."""
    doc = (Path(__file__).parents[2] / "docs" / "PROTOCOL.md").read_text()
    dump = re.findall(r"^[0-9a-f]{4}  ((?:[0-9a-f]{2} ?)+)$", doc, flags=re.MULTILINE)
    infer = Infer(7, 42, 1_700_000_000_000_000_000, "pick", {}, np.array([0.5, -1.0], np.float32))
    frames = encode(infer)
    assert bytes.fromhex("".join(dump)) == frames[0] and len(frames[0]) == 172
    assert bytes(frames[1]).hex(" ") == "00 00 00 3f 00 00 80 bf"
