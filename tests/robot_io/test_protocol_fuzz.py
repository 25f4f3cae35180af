"""decode on hostile input: it returns a message or raises MessageError, never anything else."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_io.protocol import PROTOCOL_VERSION, Actions, ErrorCode, Infer, Limits, MessageError, decode, encode
from robot_io.protocol.messages import MESSAGE_TYPES

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL = Limits(max_frame_bytes=1 << 16, max_header_bytes=1 << 12, max_image_side=64)


def valid_frames() -> list[list[bytes]]:
    infer = Infer(1, 2, 3, "go", {"cam": np.zeros((4, 5, 3), np.uint8)}, np.zeros(6, np.float32))
    infer.prefix, infer.guidance = np.zeros((2, 7), np.float32), np.ones((3, 7), np.float32)
    actions = Actions(1, 0, np.ones((4, 7), np.float32), True, 4, 2, {"total_ms": 1.0})
    return [[bytes(f) for f in encode(m)] for m in (infer, actions)]


VALID = valid_frames()


def decodes_or_refuses(frames, limits: Limits = SMALL) -> None:
    try:
        message = decode(frames, limits)
    except MessageError as exc:
        assert isinstance(exc.code, ErrorCode)
        assert "please report" not in str(exc), exc  # every refusal the decode makes, the refusal path explains
    else:
        assert type(message) in MESSAGE_TYPES


plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@FUZZ
@given(st.lists(st.binary(max_size=64), max_size=6))
def test_random_bytes(frames):
    decodes_or_refuses(frames)


@FUZZ
@given(st.sampled_from(VALID), st.data())
def test_truncated_flipped_missing_and_extra_frames(frames, data):
    frames = list(frames)
    i = data.draw(st.integers(0, len(frames) - 1))
    mutation = data.draw(st.sampled_from(["truncate", "flip", "drop", "extra", "duplicate"]))
    if mutation == "truncate":
        frames[i] = frames[i][: data.draw(st.integers(0, max(len(frames[i]) - 1, 0)))]
    elif mutation == "flip" and frames[i]:
        j = data.draw(st.integers(0, len(frames[i]) - 1))
        frames[i] = frames[i][:j] + bytes([frames[i][j] ^ data.draw(st.integers(1, 255))]) + frames[i][j + 1 :]
    elif mutation == "drop":
        del frames[i]
    elif mutation == "extra":
        frames.append(data.draw(st.binary(max_size=32)))
    else:
        frames.insert(i, frames[i])
    decodes_or_refuses(frames)


@FUZZ
@given(st.sampled_from(VALID), st.data())
def test_wrong_types_anywhere_in_the_header(frames, data):
    header = msgpack.unpackb(frames[0])
    target = data.draw(st.sampled_from(["top", "body", "descriptor"]))
    where = {"top": header, "body": header["body"], "descriptor": header["arrays"][0]}[target]
    key = data.draw(st.sampled_from(sorted(where)) | st.text(max_size=6))
    where[key] = data.draw(plain)
    decodes_or_refuses([msgpack.packb(header), *frames[1:]])


def packed(value, path: tuple | None = None, entry: tuple = ()) -> bytes:
    """`value` packed, maps as map16 and lists as list32; the map at `path` (keys and indices) with `entry` (a key
    and a value) appended after its own entries, so that the key may come twice. path None: nothing appended."""

    def inner(key) -> tuple | None:
        return path[1:] if path and path[0] == key else None

    if type(value) is list:
        items = [packed(item, inner(i), entry) for i, item in enumerate(value)]
        return b"\xdd" + len(items).to_bytes(4, "big") + b"".join(items)
    if type(value) is not dict:
        return msgpack.packb(value)
    items = [msgpack.packb(key) + packed(item, inner(key), entry) for key, item in value.items()]
    if path == ():
        items.append(msgpack.packb(entry[0]) + msgpack.packb(entry[1]))
    return b"\xde" + len(items).to_bytes(2, "big") + b"".join(items)


@FUZZ
@given(st.sampled_from(VALID), st.data())
def test_a_key_twice_in_any_map_of_the_header(frames, data):
    """Refused in the header's or the body's map (the version first, read as the last `v`); inside them, the last
    value of the key is kept once every value is checked, as msgspec reads it: either way a refusal names why."""
    header = msgpack.unpackb(frames[0])
    maps = [(), ("body",), ("arrays", 0)] + ([("body", "timing_ms")] if "timing_ms" in header["body"] else [])
    path = data.draw(st.sampled_from(maps))
    where = header
    for key in path:
        where = where[key]
    key = data.draw(st.sampled_from(sorted(where)))
    value = data.draw(st.just(where[key]) | plain)
    frames = [packed(header, path, (key, value)), *frames[1:]]
    decodes_or_refuses(frames)
    if len(path) < 2:
        with pytest.raises(MessageError) as refused:
            decode(frames, SMALL)
        version = path == () and key == "v" and type(value) is int and value != PROTOCOL_VERSION
        assert refused.value.code is (ErrorCode.BAD_VERSION if version else ErrorCode.BAD_MESSAGE)


@FUZZ
@given(
    st.sampled_from(["uint8", "float32", "float64", "int64", "object", "<f4", ""]),
    st.lists(st.integers(-(2**40), 2**40), max_size=6),
    st.integers(0, 4096),
    st.sampled_from(["state", "prefix", "image/cam", "actions", "weird"]),
)
def test_arbitrary_descriptors_and_frame_sizes(dtype, shape, nbytes, name):
    header = msgpack.unpackb(VALID[0][0])
    header["arrays"] = [{"name": name, "dtype": dtype, "shape": shape}]
    decodes_or_refuses([msgpack.packb(header), b"\x00" * nbytes])


@FUZZ
@given(st.sampled_from([np.nan, np.inf, -np.inf]), st.integers(0, 5))
def test_non_finite_floats_are_bad_values(value, index):
    frames = list(VALID[0])
    state = np.zeros(6, np.float32)
    state[index] = value
    frames[1] = state.tobytes()
    try:
        decode(frames, SMALL)
    except MessageError as exc:
        assert exc.code is ErrorCode.BAD_VALUE and "NaN or inf" in str(exc)
    else:
        raise AssertionError("a non-finite state was accepted")


@FUZZ
@given(
    st.integers(1, 8),
    st.integers(0, 5),
    st.integers(1, 9),
    st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9)), max_size=3),
    st.floats(-(2.0**100), 2.0**100, width=32),
)
def test_valid_requests_round_trip(state_dim, rows, action_dim, sizes, fill):
    images = {f"cam{i}": np.full((h, w, 3), i, np.uint8) for i, (h, w) in enumerate(sizes)}
    prefix = np.full((rows, action_dim), fill, np.float32)
    infer = Infer(1, 2, 3, "go", images, np.full(state_dim, fill, np.float32), prefix=prefix)
    decoded = decode([bytes(f) for f in encode(infer, SMALL)], SMALL)
    assert decoded.prefix.tobytes() == prefix.tobytes() and decoded.state.shape == (state_dim,)
    assert {k: v.shape for k, v in decoded.images.items()} == {k: v.shape for k, v in images.items()}


BOMBS = [
    b"\xdd\xff\xff\xff\xff",  # array32 declaring 4 G elements
    b"\xdf\xff\xff\xff\xff",  # map32 declaring 4 G entries
    b"\xdb\xff\xff\xff\xff",  # str32 declaring 4 GB
    b"\xc6\xff\xff\xff\xff",  # bin32 declaring 4 GB
    b"\xc9\xff\xff\xff\xff\x01",  # ext32 declaring 4 GB
    b"\x91" * 3000 + b"\x00",  # nesting deeper than the parser's stack
    b"\x81\x01\x02",  # map with an int key
    b"\xc1",  # never-used byte
    b"\xd6\xff\x00\x00\x00\x00",  # timestamp ext
]


def test_msgpack_bombs_are_malformed_messages():
    for bomb in BOMBS:
        try:
            decode([bomb])
        except MessageError as exc:
            assert exc.code is ErrorCode.BAD_MESSAGE, bomb[:8]
        else:
            raise AssertionError(f"bomb {bomb[:8]!r} decoded")


def test_huge_declared_shape_is_refused_without_allocating():
    header = msgpack.unpackb(VALID[0][0])
    header["arrays"][0]["shape"] = [2**31 - 1] * 4
    try:
        decode([msgpack.packb(header), *VALID[0][1:]])
    except MessageError as exc:
        assert exc.code is ErrorCode.BAD_MESSAGE and "does not match" in str(exc)
    else:
        raise AssertionError("accepted")
