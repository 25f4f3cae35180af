"""Whole-message size bound on the live server: a message past Limits.max_message_bytes is refused before it is
decoded and its memory is given back at once (the server's RSS measured around one 120 MiB message)."""

from __future__ import annotations

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from robot_io.protocol import Error, ErrorCode, Limits, decode, encode
from tests.server.conftest import raw_dealer
from tests.server.fake_runtime import METADATA, WAIT_S, FakeRuntime, fake_infer
from vlash.server.config import ServerConfig
from vlash.server.server import PolicyServer

MIB = 1 << 20
LIMITS = Limits(max_message_bytes=64 * MIB)  # one frame may still be 64 MiB


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


@pytest.fixture(scope="module")
def server():
    srv = PolicyServer(FakeRuntime(auto_release=True), METADATA, ServerConfig(bind="tcp://127.0.0.1:0"), LIMITS)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def dealer(server):
    with raw_dealer(server.endpoint) as socket:
        yield socket


def reply(socket: zmq.Socket):
    assert socket.poll(int(WAIT_S * 1000)), "no reply"
    return decode(socket.recv_multipart())


def test_a_message_over_the_total_is_refused_and_its_memory_returned_at_once(dealer, server):
    payload = b"\x00" * (40 * MIB)  # 40 MiB frames: each under the per-frame limit, mmap-allocated by libzmq
    before = rss_mib()
    dealer.send_multipart([b"\x80", payload, payload, payload], copy=False)  # 120 MiB in one message
    refused = reply(dealer)
    after = rss_mib()
    assert (
        isinstance(refused, Error) and refused.code == ErrorCode.BAD_MESSAGE and "exceeds the limits" in refused.message
    )
    assert after - before < 40, f"RSS {before:.0f} -> {after:.0f} MiB after the refusal: the message was kept"
    dealer.send_multipart(encode(fake_infer(7)))  # and the server serves as before
    final = reply(dealer)
    assert final.request_id == 7 and final.final


def test_too_many_frames_are_refused_without_decoding(dealer, server):
    dealer.send_multipart([b"\x80"] * (LIMITS.max_frames + 10))
    refused = reply(dealer)
    assert isinstance(refused, Error) and "frames" in refused.message and "exceeds the limits" in refused.message


def test_a_frame_over_the_largest_accepted_is_dropped_by_libzmq_before_vlash_sees_it():
    limits = Limits(max_frame_bytes=MIB, max_message_bytes=2 * MIB)  # so no frame over 1 MiB is accepted
    server = PolicyServer(FakeRuntime(auto_release=True), METADATA, ServerConfig(bind="tcp://127.0.0.1:0"), limits)
    server.start()
    context = zmq.Context()
    socket = context.socket(zmq.DEALER)
    monitor = socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    try:
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(server.endpoint)
        socket.send_multipart([b"\x80", b"\x00" * (MIB + 1024)])
        assert monitor.poll(int(WAIT_S * 1000)), "the server kept a peer that sent an oversized frame"
        assert recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED
        assert server.counters()["errors"] == 0  # vlash never saw the message
    finally:
        socket.disable_monitor()
        monitor.close(linger=0)
        socket.close(linger=0)
        context.term()
        server.stop()
