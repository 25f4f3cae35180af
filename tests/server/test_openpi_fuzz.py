"""Hostile openpi clients against the live endpoint, over loopback: every hostile frame gets openpi's error reply
(a text frame naming the bound, then close 1011), random observations get a reply or that error, a connection
reset right after the handshake is no failure, and while one websocket client sends hostile frames a ZeroMQ client
of the same server is still answered. The codec's own tests: tests/server/test_openpi_bounds.py."""

from __future__ import annotations

import base64
import logging
import os
import re
import socket
import struct
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosedError

from robot_io.client import PolicyClient
from robot_io.protocol import Infer
from tests.server.conftest import PROMPT
from tests.server.openpi_hostile import HOSTILE
from tests.server.test_openpi_endpoint import OpenpiTestClient
from vlash.server.config import OpenpiConfig
from vlash.server.openpi_codec import packb, unpackb
from vlash.server.openpi_endpoint import OpenpiEndpoint

TIMEOUT_S = 30.0  # per frame; a busy 2-core machine
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
IMAGE = np.random.default_rng(0).integers(0, 256, (28, 28, 3), dtype=np.uint8)
VALID = {"images": {"base_0_rgb": IMAGE}, "state": [0.5, 1.0], "prompt": PROMPT, "seed": 3}  # vlash-native keys
ZMQ_REQUESTS = 4  # ZeroMQ requests served while the hostile client sends
MAX_HOSTILE_FRAMES = 200  # the hostile client's bound, should the ZeroMQ requests never end


@pytest.fixture(scope="module")
def endpoint(server):  # refusals at once: hundreds of refused frames (their pacing: test_openpi_connections.py)
    with OpenpiEndpoint(server, OpenpiConfig(port=0, infer_timeout_s=TIMEOUT_S, refusal_delay_s=0)) as ep:
        yield ep


def _served(endpoint) -> np.ndarray:
    client = OpenpiTestClient(endpoint.url)
    try:
        return client.infer(VALID)["actions"]
    finally:
        client.close()


def _refusal(endpoint, frame: bytes) -> tuple[str, int | None]:
    client = OpenpiTestClient(endpoint.url)
    try:
        return client.error(frame)
    finally:
        client.close()


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_frames_get_the_error_reply_and_the_endpoint_serves_on(endpoint, server, name):
    errors_before = endpoint.counters["errors"]
    message, code = _refusal(endpoint, HOSTILE[name].build())
    assert code == 1011 and re.search(HOSTILE[name].refusal, message) and len(message) < 120, message
    assert endpoint.counters["errors"] == errors_before + 1
    assert _served(endpoint).shape == (server.metadata.chunk_length, 2) and server.running


KEYS = st.sampled_from(["images", "state", "prompt", "seed", "observation/joint_position", "observation/image", "x"])
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=16)
    | st.builds(np.zeros, st.lists(st.integers(0, 4), max_size=3), st.sampled_from(["<f4", "|u1", "<i8", "|b1"]))
)
VALUES = st.recursive(
    LEAVES, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS | st.text(max_size=4), inner, max_size=5)
)


@FUZZ
@given(st.dictionaries(KEYS, VALUES, max_size=6), st.booleans())
def test_random_observations_get_chunks_or_the_error_reply(endpoint, observation, with_valid_keys):
    frame = packb({**VALID, **observation} if with_valid_keys else observation)
    client = OpenpiTestClient(endpoint.url)
    try:
        client.ws.send(frame)
        reply = client.ws.recv(timeout=TIMEOUT_S)
        if isinstance(reply, bytes):
            assert unpackb(reply)["actions"].ndim == 2
        else:  # the error reply: the text, then close 1011
            assert reply and len(reply) < 2000
            with pytest.raises(ConnectionClosedError, match="1011"):
                client.ws.recv(timeout=TIMEOUT_S)
    finally:
        client.close()


def test_a_zeromq_client_is_answered_while_a_websocket_client_sends_hostile_frames(endpoint, server):
    """No client may stall another: a 16 MiB frame of empty lists once held the GIL 11-16 s while it decoded."""
    frames = [(name, hostile.build()) for name, hostile in HOSTILE.items()]
    started, stop, refusals, failures = threading.Event(), threading.Event(), [], []

    def hostile_client() -> None:
        try:
            for i in range(MAX_HOSTILE_FRAMES):
                name, frame = frames[i % len(frames)]
                refusals.append((name, *_refusal(endpoint, frame)))
                started.set()
                if stop.is_set():
                    return
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)
            started.set()

    sender = threading.Thread(target=hostile_client, daemon=True)
    sender.start()
    assert started.wait(TIMEOUT_S) and not failures, failures
    answers = []
    with PolicyClient(server.endpoint, timeout_s=TIMEOUT_S) as client:
        for request_id in range(ZMQ_REQUESTS):
            infer = Infer(request_id, 0, time.time_ns(), PROMPT, {"base_0_rgb": IMAGE}, np.array([0.5, 1.0], "f4"))
            answers.append(client.infer(infer).actions)
            assert sender.is_alive() or len(refusals) == MAX_HOSTILE_FRAMES  # the hostile client was still sending
    stop.set()
    sender.join(TIMEOUT_S)
    assert not sender.is_alive() and not failures, failures
    assert [a.shape for a in answers] == [(server.metadata.chunk_length, 2)] * ZMQ_REQUESTS
    assert len(refusals) >= 2
    for name, message, code in refusals:
        assert code == 1011 and re.search(HOSTILE[name].refusal, message), (name, message)


class ResetConnection:
    """A websockets ServerConnection whose socket was reset right after the handshake: it has no peer left."""

    @property
    def remote_address(self):
        raise OSError(107, "Transport endpoint is not connected")


def test_a_connection_reset_right_after_the_handshake_is_no_failure(endpoint, caplog):
    before = dict(endpoint.counters)
    with caplog.at_level(logging.DEBUG):
        endpoint._serve_connection(ResetConnection())  # once raised OSError: a traceback in websockets' log
    assert endpoint.counters == {**before, "connections": before["connections"] + 1}  # not counted as an error
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_real_resets_after_the_handshake_log_no_traceback(endpoint, server, caplog):
    request = (
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    with caplog.at_level(logging.INFO):
        for _ in range(10):
            with socket.create_connection(("127.0.0.1", endpoint.port), timeout=TIMEOUT_S) as sock:
                sock.sendall(request.encode())
                response = b""
                while b"\r\n\r\n" not in response:
                    response += sock.recv(4096)
                assert response.startswith(b"HTTP/1.1 101")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close: RST
        assert _served(endpoint).shape == (server.metadata.chunk_length, 2)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
