"""Server endpoints a robot connects to: tcp://HOST:PORT, ipc:///PATH or inproc://NAME (in-process clients).

Checked before any socket exists, so a typo is one clear error instead of a ZeroMQ "Invalid argument" (or a
port libzmq silently wraps: tcp://host:99999 connects to port 34463)."""

from __future__ import annotations

from robot_io.protocol.errors import EndpointError

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"  # where `vlash serve` binds unless told otherwise


def check_endpoint(endpoint: str) -> str:
    """`endpoint` if a client can connect to it, else EndpointError saying what to give instead."""
    if not isinstance(endpoint, str):
        raise EndpointError(f"endpoint must be a string like {DEFAULT_ENDPOINT}, got {type(endpoint).__name__}")
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        guess = endpoint if endpoint.rpartition(":")[2].isdigit() else f"{endpoint or '127.0.0.1'}:5555"
        raise EndpointError(f"{endpoint!r} is not an endpoint: give tcp://HOST:PORT or ipc:///PATH, e.g. tcp://{guess}")
    if scheme in ("ipc", "inproc") and rest:
        return endpoint
    host, colon, port = rest.rpartition(":")
    if scheme != "tcp" or not colon or not host or host == "*" or not port.isdigit() or not 0 < int(port) < 65536:
        raise EndpointError(
            f"{endpoint!r}: give tcp://HOST:PORT (a port from 1 to 65535) or ipc:///PATH, e.g. {DEFAULT_ENDPOINT}"
        )
    return endpoint
