"""The openpi codec's bounds on a frame's structure (vlash.server.openpi_codec): hostile frames are refused with a
short CodecError before the decoder builds anything, frames at the bounds decode, and the header walk agrees with
msgpack on every type. The live endpoint's side: tests/server/test_openpi_fuzz.py."""

from __future__ import annotations

import contextlib

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.server.openpi_hostile import HOSTILE
from vlash.server import openpi_codec
from vlash.server.openpi_codec import MAX_DEPTH, MAX_ITEMS, PROTOCOL_LIMITS, CodecError, check_structure, packb, unpackb

FUZZ = settings(max_examples=200, deadline=None)


@pytest.fixture
def decode_calls(monkeypatch) -> list[int]:
    """Counts calls of the codec's decoding step, which runs after the structure walk (each still decodes)."""
    calls, decode = [], openpi_codec.decode_frame
    monkeypatch.setattr(openpi_codec, "decode_frame", lambda frame: calls.append(1) or decode(frame))
    return calls


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_frames_are_refused_with_a_short_error_before_decoding(name, decode_calls):
    hostile = HOSTILE[name]
    with pytest.raises(CodecError, match=hostile.refusal) as refused:
        unpackb(hostile.build())
    message = str(refused.value)
    assert message.startswith("frame out of bounds: ") and len(message) < 120 and "\n" not in message
    assert len(decode_calls) == int(hostile.decodes)  # the structural bounds refuse without decoding


def test_frames_at_the_bounds_decode():
    deepest: dict = {"leaf": np.zeros(3, np.float32)}  # with the frame's map: 4 levels (an ndarray map > its shape)
    for level in range(MAX_DEPTH - 4):
        deepest = {f"level{level}": deepest}
    observation = {
        "state": [0.5] * MAX_ITEMS,  # the longest list: a state vector of Limits.max_state_dim
        "keys": {f"k{i}": i for i in range(MAX_ITEMS)},
        "prompt": "\U0001f916" * PROTOCOL_LIMITS.max_prompt_chars,  # 4 UTF-8 bytes each
        "nested": deepest,
    }
    out = unpackb(packb(observation))
    assert out["state"] == observation["state"] and out["keys"] == observation["keys"]
    assert out["prompt"] == observation["prompt"]
    leaf = out["nested"]
    for level in reversed(range(MAX_DEPTH - 4)):
        leaf = leaf[f"level{level}"]
    np.testing.assert_array_equal(leaf["leaf"], np.zeros(3, np.float32))


ONE_OF_EACH_TYPE = [
    None, True, False, 0, 127, -1, -32, -33, 128, 255, 256, 65535, 65536, 2**32, 2**64 - 1, -129, -(2**15) - 1,
    -(2**31) - 1, -(2**63), 1.5, "", "a" * 31, "a" * 32, "a" * 300, "a" * 70_000, b"", b"x" * 300, b"x" * 70_000,
    *(msgpack.ExtType(1, b"e" * n) for n in (1, 2, 4, 8, 16, 3, 300, 70_000)),
    [1] * 15, [1] * 16, [1] * 70_000, {str(i): i for i in range(15)}, {str(i): i for i in range(16)},
]  # fmt: skip


@pytest.mark.parametrize("single_float", [False, True])
def test_the_header_walk_steps_over_every_msgpack_type(single_float):
    """[value, a list nested too deep]: the walk reaches the nesting only if it stepped over `value` exactly."""
    too_deep = b"\x91" * (MAX_DEPTH + 1) + b"\xc0"
    for value in ONE_OF_EACH_TYPE:
        packed = msgpack.packb(value, use_bin_type=True, use_single_float=single_float)
        with pytest.raises(CodecError, match="nested deeper|items") as refused:
            check_structure(b"\x92" + packed + too_deep)
        long_container = isinstance(value, list | dict) and len(value) > MAX_ITEMS
        assert ("nested deeper" in str(refused.value)) != long_container, value


PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=8) | st.binary(),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=4), inner, max_size=6),
    max_leaves=60,
)


@FUZZ
@given(PLAIN)
def test_plain_values_within_the_bounds_decode_as_msgpack_decodes_them(value):
    frame = msgpack.packb(value, use_bin_type=True)
    try:
        out = unpackb(frame)
    except CodecError as exc:  # lists and maps of 6 at most, 60 leaves: only the nesting can be out of bounds
        assert "nested deeper" in str(exc)
        return
    assert msgpack.packb(out, use_bin_type=True) == frame


@FUZZ
@given(st.binary(max_size=256), st.integers(0, 64))
def test_random_and_mangled_bytes_raise_codec_error_or_decode(noise, cut):
    observation = packb({"state": np.arange(4, dtype=np.float32), "prompt": "go", "nested": {"l": [[1], [2, 3]]}})
    assert unpackb(observation)["prompt"] == "go"
    for frame in (noise, observation[:cut] + noise, observation + noise, noise + observation):
        with contextlib.suppress(CodecError):  # the only exception a frame may raise: any other fails the test
            unpackb(frame)
