"""Hostile input against the live server: every message gets its ERROR (or normal) reply, the server never
stops answering, and a valid request is still served after each batch."""

from __future__ import annotations

import time

import msgpack
import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_io.protocol import Actions, Error, ErrorCode, Infer, Ping, decode, encode
from tests.server.conftest import PROMPT, raw_dealer

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TIMEOUT_MS = 5000
STATE = np.array([0.5, 1.0], np.float32)


@pytest.fixture(scope="module")
def dealer(server):
    with raw_dealer(server.endpoint) as socket:
        yield socket


def _valid_infer(request_id: int = 1, **kw) -> Infer:
    images = {"base_0_rgb": np.zeros((28, 28, 3), np.uint8)}
    return Infer(request_id, 0, time.time_ns(), PROMPT, images, STATE.copy(), seed=0, **kw)


VALID = [bytes(f) for f in encode(_valid_infer())]


def exchange(socket: zmq.Socket, frames: list[bytes]) -> list:
    """Send `frames`, then a PING; return the decoded replies that arrived before the PING's (bounded wait)."""
    socket.send_multipart(frames)
    marker = time.time_ns()
    socket.send_multipart(encode(Ping(marker)))
    replies = []
    deadline = time.monotonic() + TIMEOUT_MS / 1e3
    while time.monotonic() < deadline:
        if not socket.poll(TIMEOUT_MS):
            break
        message = decode(socket.recv_multipart())
        if isinstance(message, Ping) and message.sent_ns == marker:
            return replies
        replies.append(message)
    raise AssertionError(f"the server stopped answering (replies so far: {replies})")


def refused(replies: list, *codes: ErrorCode) -> bool:
    return any(isinstance(m, Error) and m.code in codes for m in replies)


def still_serves(socket: zmq.Socket, server) -> None:
    errors_before = server.counters()["errors"]
    socket.send_multipart(encode(_valid_infer(request_id=999_999)))
    deadline = time.monotonic() + TIMEOUT_MS / 1e3
    while time.monotonic() < deadline and socket.poll(TIMEOUT_MS):
        message = decode(socket.recv_multipart())
        if isinstance(message, Actions) and message.request_id == 999_999 and message.final:
            assert server.running and server.counters()["errors"] == errors_before
            return
    raise AssertionError("a valid request was not served after the fuzz batch")


def _header(frames: list[bytes]) -> dict:
    return msgpack.unpackb(frames[0], raw=False)


def _with_header(header: dict, frames: list[bytes]) -> list[bytes]:
    return [msgpack.packb(header), *frames[1:]]


@FUZZ
@given(st.lists(st.binary(max_size=96), min_size=1, max_size=6))
def test_random_frames_are_refused(dealer, server, frames):
    assert refused(exchange(dealer, frames), ErrorCode.BAD_MESSAGE, ErrorCode.BAD_VERSION, ErrorCode.BAD_VALUE)


@FUZZ
@given(st.data())
def test_truncated_flipped_dropped_and_extra_frames(dealer, server, data):
    frames = list(VALID)
    i = data.draw(st.integers(0, len(frames) - 1))
    mutation = data.draw(st.sampled_from(["truncate", "flip", "drop", "extra"]))
    if mutation == "truncate":
        frames[i] = frames[i][: data.draw(st.integers(0, max(0, len(frames[i]) - 1)))]
    elif mutation == "flip":
        j = data.draw(st.integers(0, len(frames[i]) - 1))
        frames[i] = frames[i][:j] + bytes([frames[i][j] ^ data.draw(st.integers(1, 255))]) + frames[i][j + 1 :]
    elif mutation == "drop":
        del frames[i]
    else:
        frames.insert(i + 1, data.draw(st.binary(max_size=64)))
    replies = exchange(dealer, frames)
    if mutation in ("truncate", "drop", "extra") and frames:
        assert refused(replies, ErrorCode.BAD_MESSAGE, ErrorCode.BAD_VALUE), (mutation, replies)


@FUZZ
@given(
    st.sampled_from(["state", "image"]),
    st.sampled_from(["float64", "int32", "uint8", "float16", "object", "<f4x", ""]),
    st.lists(st.integers(0, 40), max_size=4),
)
def test_wrong_dtypes_and_shapes_are_refused(dealer, server, name, dtype, shape):
    frames = list(VALID)
    header = _header(frames)
    index = next(i for i, d in enumerate(header["arrays"]) if (d["name"] == "state") == (name == "state"))
    header["arrays"][index].update(dtype=dtype, shape=shape)
    replies = exchange(dealer, _with_header(header, frames))
    assert refused(replies, ErrorCode.BAD_MESSAGE, ErrorCode.BAD_VALUE, ErrorCode.UNKNOWN_CAMERA), replies


@FUZZ
@given(
    st.sampled_from(["state", "future_state", "prefix", "guidance"]),
    st.sampled_from([np.nan, np.inf, -np.inf]),
    st.integers(0, 1),
)
def test_nan_and_inf_are_refused(dealer, server, field, bad, row):
    infer = _valid_infer()
    value = {
        "state": STATE.copy(),
        "future_state": STATE.copy(),
        "prefix": np.zeros((2, 2), np.float32),
        "guidance": np.zeros((2, 2), np.float32),
    }[field]
    value.reshape(-1)[row] = bad
    setattr(infer, field, value)
    frames = [bytes(f) for f in encode(infer)]
    assert refused(exchange(dealer, frames), ErrorCode.BAD_VALUE)


NEST = "\x00nest\x00"  # a placeholder str in a header, swapped for a deeply nested list once packed


@pytest.mark.parametrize("depth", [5, 600, 1000, 1020])
@pytest.mark.parametrize("where", ["type", "dtype", "shape", "prompt", "body"])
def test_deeply_nested_values_are_refused(dealer, server, where, depth):
    """A list nested ~1000 deep in a 1 KB header once overflowed the stack of the socket thread: it died and the
    server never answered again. msgpack packs at most ~500 levels, so the nesting is spliced in as bytes."""
    header = _header(VALID)
    if where == "type":
        header["type"] = NEST
    elif where in ("dtype", "shape"):
        header["arrays"][0][where] = NEST
    elif where == "prompt":
        header["body"]["prompt"] = NEST
    else:
        header["body"] = NEST
    packed = msgpack.packb(header).replace(msgpack.packb(NEST), b"\x91" * depth + b"\x00")
    assert refused(exchange(dealer, [packed, *VALID[1:]]), ErrorCode.BAD_MESSAGE)
    still_serves(dealer, server)


def test_oversized_and_empty_frames_are_refused(dealer, server):
    assert refused(exchange(dealer, [b"\x81" + b"\x00" * 200_000]), ErrorCode.BAD_MESSAGE)
    assert refused(exchange(dealer, [b""]), ErrorCode.BAD_MESSAGE)
    assert refused(exchange(dealer, [VALID[0]] * 40), ErrorCode.BAD_MESSAGE)  # more frames than the limit
    big = _header(VALID)
    big["body"]["prompt"] = "x" * 50_000
    assert refused(exchange(dealer, _with_header(big, VALID)), ErrorCode.BAD_MESSAGE, ErrorCode.BAD_VALUE)
    still_serves(dealer, server)


def test_client_only_replies_are_refused_and_the_server_keeps_serving(dealer, server):
    actions = Actions(1, 0, np.zeros((50, 2), np.float32), True, 50, 0)
    assert refused(exchange(dealer, [bytes(f) for f in encode(actions)]), ErrorCode.BAD_MESSAGE)
    still_serves(dealer, server)


def test_every_refusal_is_counted_and_the_server_keeps_serving(dealer, server):
    """Self-contained (pytest-xdist may run any test of this module alone): each refused frame counts one error."""
    before = server.counters()["errors"]
    for i in range(20):
        assert refused(exchange(dealer, [bytes([0xC1, i])]), ErrorCode.BAD_MESSAGE)  # 0xc1: never valid msgpack
    assert server.counters()["errors"] - before == 20
    still_serves(dealer, server)
