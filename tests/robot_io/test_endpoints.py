"""Server endpoints are checked before any socket exists: one clear error that suggests a correct endpoint."""

from __future__ import annotations

import pytest

from robot_io.client import PolicyClient
from robot_io.protocol.endpoints import check_endpoint
from robot_io.protocol.errors import EndpointError


@pytest.mark.parametrize(
    "good", ["tcp://127.0.0.1:5555", "tcp://localhost:1", "tcp://[::1]:5555", "ipc:///tmp/v", "inproc://x"]
)
def test_endpoints_a_client_can_connect_to_pass(good):
    assert check_endpoint(good) == good


@pytest.mark.parametrize(
    ("bad", "suggestion"),
    [
        ("localhost:5555", "tcp://localhost:5555"),
        ("127.0.0.1", "tcp://127.0.0.1:5555"),
        ("tcp://localhost", "tcp://127.0.0.1:5555"),
        ("tcp://host:99999", "port from 1 to 65535"),  # libzmq would wrap it to 34463
        ("tcp://*:5555", "tcp://HOST:PORT"),
        ("udp://h:1", "tcp://HOST:PORT"),
    ],
)
def test_bad_endpoints_say_what_to_give(bad, suggestion):
    with pytest.raises(EndpointError, match=suggestion.replace(".", r"\.")):
        check_endpoint(bad)


def test_the_client_refuses_a_bad_endpoint_before_opening_a_socket():
    with pytest.raises(EndpointError, match="tcp://HOST:PORT"):  # used to be zmq.ZMQError "Invalid argument" on connect
        PolicyClient("tcp://localhost", timeout_s=0.5)
