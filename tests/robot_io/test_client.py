"""PolicyClient against an in-test fake ROUTER server on loopback (tcp 127.0.0.1 and ipc://)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zmq

from robot_io.client import PolicyClient
from robot_io.protocol import (
    Actions,
    CameraSpec,
    CurveClientKeys,
    Error,
    ErrorCode,
    Hello,
    Infer,
    MessageError,
    Metadata,
    Ping,
    RemoteError,
    Reset,
    Stats,
    decode,
    encode,
    generate_keypair,
)
from robot_io.protocol.errors import DeadlineExceeded
from vlash.server.curve import CurveServer

H, A = 8, 3
METADATA = Metadata("fake", [CameraSpec("front", 4, 4)], 3, A, H, 30.0, "fp32", "fake", 2, "horizon-aware", False)


def reply_normally(message):
    """What a well-behaved server answers: partial then final ACTIONS for INFER."""
    if isinstance(message, Hello):
        return [METADATA]
    if isinstance(message, Infer):
        chunk = np.arange(H * A, dtype=np.float32).reshape(H, A) + message.request_id
        rid, step = message.request_id, message.step_index
        return [
            Actions(rid, 0, chunk[:2], False, H, step, {}),
            Actions(rid, 0, chunk, True, H, step, {"total_ms": 1.5}),
        ]
    if isinstance(message, Ping):
        return [Ping(message.sent_ns, time.time_ns())]
    if isinstance(message, Reset):
        return [Reset()]
    if isinstance(message, Stats):
        return [Stats({"served": 3, "p50_ms": 1.25})]
    return []


class FakeServer:
    """A ROUTER answering each decoded request with handler(request) -> list of replies (messages, or lists of
    raw frames), in a thread."""

    def __init__(
        self,
        endpoint: str,
        handler: Callable = reply_normally,
        keys_dir: Path | None = None,  # CurveZMQ (with allow_dir): the server's key pair
        allow_dir: Path | None = None,
    ):
        self.context = zmq.Context()
        self.curve = CurveServer(self.context, keys_dir, allow_dir)  # a no-op without keys_dir
        self.curve.start()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.curve.configure(self.socket)
        self.socket.bind(endpoint)
        self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.handler, self.received = handler, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self.socket.poll(20):
                continue
            identity, *frames = self.socket.recv_multipart(copy=False)
            message = decode(frames)
            self.received.append(message)
            for reply in self.handler(message):  # a list is sent as raw frames (hostile replies)
                frames = reply if isinstance(reply, list) else encode(reply)
                self.socket.send_multipart([identity, *frames], copy=False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.socket.close(linger=0)
        self.curve.stop()
        self.context.term()


@pytest.fixture(params=["tcp", "ipc"])
def endpoint(request, tmp_path) -> str:
    return "tcp://127.0.0.1:*" if request.param == "tcp" else f"ipc://{tmp_path}/policy.sock"


@pytest.fixture
def server(endpoint):
    srv = FakeServer(endpoint)
    yield srv
    srv.close()


def make_infer(request_id: int = 1, state_dtype=np.float32) -> Infer:
    return Infer(
        request_id=request_id,
        step_index=10 + request_id,
        capture_time_ns=time.time_ns(),
        prompt="pick",
        images={"front": np.zeros((4, 4, 3), np.uint8)},
        state=np.zeros(3, state_dtype),
    )


def poll_until(client: PolicyClient, timeout_s: float = 5.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (message := client.poll(0.05)) is not None:
            return message
    raise AssertionError("no message within the test's bound")


def test_handshake_returns_the_servers_metadata(server):
    with PolicyClient(server.endpoint, timeout_s=5.0, client_name="arm-1") as client:
        assert client.connect() == METADATA
        assert server.received[0] == Hello(client="arm-1")


def test_submit_and_poll_stream_partial_then_final_actions(server):
    with PolicyClient(server.endpoint) as client:
        client.submit(make_infer(7))
        partial, final = poll_until(client), poll_until(client)
        assert (partial.final, partial.start, partial.actions.shape) == (False, 0, (2, A))
        assert final.final and final.actions.shape == (H, A) and final.step_index == 17
        np.testing.assert_array_equal(final.actions[:2], partial.actions)
        assert client.pending == () and client.poll(0.0) is None


def reply_with_a_short_chunk(message):
    """A server whose sampling stopped early: the final ACTIONS carries rows [0, 5) of the H = 8 chunk."""
    if isinstance(message, Infer):
        chunk = np.arange(5 * A, dtype=np.float32).reshape(5, A)
        rid, step = message.request_id, message.step_index
        return [
            Actions(rid, 0, chunk[:2], False, H, step, {}),
            Actions(rid, 0, chunk, True, H, step, {"total_ms": 1.0}),
        ]
    return reply_normally(message)


def test_a_final_chunk_shorter_than_the_chunk_length_is_delivered(endpoint):
    server = FakeServer(endpoint, reply_with_a_short_chunk)
    try:
        with PolicyClient(server.endpoint, timeout_s=5.0) as client:
            final = client.infer(make_infer(4))
            assert (final.start, final.actions.shape, final.chunk_length) == (0, (5, A), H)
            client.submit(make_infer(5))
            partial, final = poll_until(client), poll_until(client)
            assert not partial.final and final.final and final.actions.shape == (5, A)
            assert client.pending == () and client.counters["bad"] == 0
    finally:
        server.close()


def test_infer_blocks_for_the_final_chunk_and_skips_partials(server):
    with PolicyClient(server.endpoint) as client:
        actions = client.infer(make_infer(3))
        assert actions.final and actions.timing_ms == {"total_ms": 1.5}
        assert actions.actions[0, 0] == 3.0
        assert client.poll(0.05) is None  # the partial message was not left behind


def test_ping_reset_and_stats(server):
    with PolicyClient(server.endpoint) as client:
        assert 0.0 < client.ping() < 5000.0
        client.reset()
        assert isinstance(server.received[-1], Reset)
        assert client.stats() == {"served": 3, "p50_ms": 1.25}


def test_invalid_request_is_refused_before_sending(server):
    with PolicyClient(server.endpoint) as client:
        with pytest.raises(MessageError, match="state: expected dtype float32, got float64") as info:
            client.submit(make_infer(1, state_dtype=np.float64))
        assert info.value.code is ErrorCode.BAD_VALUE and client.counters["sent"] == 0


def test_server_error_reaches_the_caller(endpoint):
    def refuse(message):
        if isinstance(message, Infer):
            return [Error(ErrorCode.UNKNOWN_CAMERA, "no camera 'front'", message.request_id)]
        return reply_normally(message)

    srv = FakeServer(endpoint, refuse)
    try:
        with PolicyClient(srv.endpoint) as client:
            with pytest.raises(RemoteError, match="UNKNOWN_CAMERA") as info:
                client.infer(make_infer(4))
            assert info.value.code is ErrorCode.UNKNOWN_CAMERA and info.value.request_id == 4
    finally:
        srv.close()


def test_dropped_request_is_reported_and_stale_ids_are_discarded(endpoint):
    def newest_wins(message):
        if isinstance(message, Infer) and message.request_id == 2:
            stale = Actions(99, 0, np.zeros((H, A), np.float32), True, H, 0, {})  # never submitted
            return [stale, Error(ErrorCode.DROPPED, "superseded", 1), *reply_normally(message)]
        return [] if isinstance(message, Infer) else reply_normally(message)

    srv = FakeServer(endpoint, newest_wins)
    try:
        with PolicyClient(srv.endpoint) as client:
            client.submit(make_infer(1))
            client.submit(make_infer(2))
            dropped = poll_until(client)
            assert isinstance(dropped, Error) and (dropped.code, dropped.request_id) == (ErrorCode.DROPPED, 1)
            replies = [poll_until(client), poll_until(client)]
            assert [(m.request_id, m.final) for m in replies] == [(2, False), (2, True)]
            assert client.counters["stale"] == 1 and client.pending == ()
    finally:
        srv.close()


# A reply header whose "type" is a list nested 1000 deep (decode once overflowed Python's stack on it).
NESTED_REPLY = [b"\x84\xa1v\x01\xa4type" + b"\x91" * 1000 + b"\x00\xa4body\x80\xa6arrays\x90"]


def test_undecodable_replies_are_counted_and_dropped_and_the_robot_goes_on(endpoint):
    def hostile(message):
        if isinstance(message, Infer):  # garbage first: deep nesting, then more frames than any message may have
            return [NESTED_REPLY, [b"\x80"] * 40, *reply_normally(message)]
        return reply_normally(message)

    srv = FakeServer(endpoint, hostile)
    try:
        with PolicyClient(srv.endpoint) as client:
            client.submit(make_infer(5))
            partial, final = poll_until(client), poll_until(client)
            assert (partial.request_id, partial.final, final.request_id, final.final) == (5, False, 5, True)
            assert client.counters["bad"] == 2
    finally:
        srv.close()


def test_any_decoder_failure_is_a_bad_reply_not_a_crash(server, monkeypatch):
    import robot_io.client

    real_decode = robot_io.client.decode

    def fails_on_actions(frames, limits):
        message = real_decode(frames, limits)
        if isinstance(message, Actions) and not message.final:
            raise RecursionError("a decoder bug on hostile bytes")
        return message

    monkeypatch.setattr(robot_io.client, "decode", fails_on_actions)
    with PolicyClient(server.endpoint) as client:
        client.submit(make_infer(6))
        final = poll_until(client)  # the partial reply was dropped, the final one comes through
        assert final.final and final.request_id == 6 and client.counters["bad"] == 1


def test_connect_to_a_missing_server_times_out_within_bound(tmp_path):
    with PolicyClient(f"ipc://{tmp_path}/nobody.sock", timeout_s=0.2) as client:
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="no HELLO reply"):
            client.connect()
        assert time.monotonic() - start < 1.5
        assert client.counters["resets"] == 1


def test_reconnects_after_the_server_restarts_on_the_same_endpoint(endpoint):
    first = FakeServer(endpoint, lambda m: [] if isinstance(m, Infer) and m.request_id == 2 else reply_normally(m))
    bound = first.endpoint  # the concrete tcp port, reused by the second server
    try:
        with PolicyClient(bound, timeout_s=0.3) as client:
            assert client.infer(make_infer(1), timeout_s=5.0).request_id == 1  # 5 s: a stall must not fail it
            client.submit(make_infer(2))  # lost: the server never answers it
            first.close()
            with pytest.raises(DeadlineExceeded, match="request 2"):
                poll_until(client)  # nothing arrives; the client gives up after its 0.3 s
            assert client.pending == () and client.counters["resets"] == 1
            second = FakeServer(bound)
            try:
                assert client.infer(make_infer(3), timeout_s=5.0).request_id == 3
                assert isinstance(second.received[0], Hello)  # re-handshake on the new socket
            finally:
                second.close()
    finally:
        if not first._stop.is_set():
            first.close()


def test_curve_server_refuses_unknown_keys_and_accepts_allowed_ones(tmp_path):
    if not zmq.has("curve"):
        pytest.skip("libzmq without CURVE")
    allowed, keys = tmp_path / "allowed", tmp_path / "keys"
    generate_keypair(keys, "server")
    good_public, good_secret = generate_keypair(keys, "good")
    _, bad_secret = generate_keypair(keys, "bad")
    allowed.mkdir()
    (allowed / "good.key").write_bytes(good_public.read_bytes())
    srv = FakeServer("tcp://127.0.0.1:*", keys_dir=keys, allow_dir=allowed)
    try:
        server_public = keys / "server.key"
        good = CurveClientKeys.from_files(good_secret, server_public)
        with PolicyClient(srv.endpoint, timeout_s=5.0, curve=good) as client:
            assert client.connect() == METADATA
        bad = CurveClientKeys.from_files(bad_secret, server_public)
        for curve in (bad, None):  # an unknown key, and no encryption at all
            with PolicyClient(srv.endpoint, timeout_s=0.3, curve=curve) as client, pytest.raises(DeadlineExceeded):
                client.connect()
        assert [type(m) for m in srv.received] == [Hello]
    finally:
        srv.close()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"endpoint": "localhost:5555"}, "tcp://localhost:5555"),
        ({"endpoint": "tcp://x:1", "timeout_s": 0}, "timeout_s"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PolicyClient(**kwargs)
