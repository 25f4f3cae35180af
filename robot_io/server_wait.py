"""Waiting for a policy server that is still starting, before the robot is driven.

`vlash serve` loads its policy before it binds its socket, and a full pi0.5 takes longer to load than a reply
timeout: a robot that gives up after one HELLO (PolicyClient.connect, 5 s) fails against a server that would have
answered a minute later. `wait_for_server` asks until the server answers or `wait_s` runs out: HELLO goes out on
a fresh socket every `client.timeout_s` (a server restarted on the endpoint meanwhile answers the new one), the
reply is polled in short slices so that a stop request ends the wait at once, and a progress line is reported every
`every_s` seconds. It never touches the robot: callers wait before they connect it, so nothing is sent to it while
the server is starting. The wait is bounded (openpi-client's waits for its server forever).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from robot_io.client import PolicyClient
from robot_io.protocol import Error, Metadata, RemoteError
from robot_io.protocol.errors import DeadlineExceeded

WAIT_REPORT_EVERY_S = 5.0  # a progress line this often while waiting
POLL_SLICE_S = 0.1  # the longest a stop request waits to be noticed


class ServerNotAnswering(DeadlineExceeded):
    """No policy server answered at the endpoint within the wait."""


def wait_for_server(
    client: PolicyClient,
    wait_s: float,
    report: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    every_s: float = WAIT_REPORT_EVERY_S,
    hint: str = "",
) -> Metadata | None:
    """The server's METADATA once it answers a HELLO, or None when `stop` was set first (the socket closed).

    `report(line)` gets "waiting for vlash serve at ENDPOINT: 12 s" every `every_s` seconds while no reply came.
    Raises ServerNotAnswering after `wait_s` without a reply (`hint`, e.g. the flag that sets the wait, goes into its
    message), RemoteError when the server answers with an ERROR, ProtocolError for another protocol version."""
    if not (math.isfinite(wait_s) and wait_s > 0):
        raise ValueError(f"wait_s must be a positive number of seconds, got {wait_s!r}")
    start = time.monotonic()
    deadline, next_report = start + wait_s, start + every_s
    handshakes = client.counters["handshakes"]
    while True:
        client.send_hello()
        resend = min(time.monotonic() + client.timeout_s, deadline)
        while (now := time.monotonic()) < resend:
            if stop is not None and stop.is_set():
                client.close()
                return None
            reply = client.poll(min(POLL_SLICE_S, resend - now))
            if isinstance(reply, Error):  # a server that refuses this client (request_id None)
                raise RemoteError(reply)
            if client.counters["handshakes"] > handshakes:
                return client.metadata
            if report is not None and (now := time.monotonic()) >= next_report:
                report(f"waiting for vlash serve at {client.endpoint}: {now - start:.0f} s")
                next_report += every_s
        client.close()  # the next HELLO goes out on a fresh socket
        if time.monotonic() >= deadline:
            break
    keys = ", and does it accept this client's CurveZMQ key" if client.curve is not None else ""
    raise ServerNotAnswering(f"no reply from {client.endpoint}: is `vlash serve` running there{keys}? "
                             f"(waited {wait_s:g} s{hint})")  # fmt: skip
