"""A client of the policy server in the same process (the openpi endpoint's connections): its requests go straight
into the server's queue, through the admission every request takes (`PolicyServer.submit` ->
vlash.runtime.admission: the protocol's bounds that `decode` checks on a remote request, then the policy's), and its
replies come back as message objects: nothing is encoded or decoded on the way. Its requests share the queue's places
with the ZeroMQ robots' as the transport "in_process" (vlash.server.shares). Newest-request-wins, batching,
the model, statistics and ERRORs are the server's, as for a robot on the socket.

    client = server.local_client(timeout_s=30.0, name="openpi 10.0.0.7:52114")
    metadata = client.connect()
    actions = client.infer(infer)     # the final ACTIONS; RemoteError on an ERROR, DeadlineExceeded past the timeout
    client.close()
"""

from __future__ import annotations

import queue
import time
import uuid
from typing import Protocol

from robot_io.protocol import Actions, Error, Infer, Metadata, RemoteError
from robot_io.protocol.errors import DeadlineExceeded


class ClientHost(Protocol):
    """What a server does for every client (vlash.server.server.PolicyServer)."""

    def hello(self, client: bytes, name: str) -> Metadata: ...

    def submit(self, client: bytes, infer: Infer, local=None) -> list[Error]: ...

    def reset(self, client: bytes) -> None: ...


class LocalClient:
    def __init__(self, server: ClientHost, timeout_s: float = 5.0, name: str = "") -> None:
        self.server, self.timeout_s, self.name = server, timeout_s, name
        self.id = b"local-" + uuid.uuid4().bytes  # a client identity no ROUTER peer has
        self._replies: queue.SimpleQueue[Actions | Error] = queue.SimpleQueue()

    def connect(self) -> Metadata:
        return self.server.hello(self.id, self.name)

    def infer(self, infer: Infer) -> Actions:
        """Submit and wait for the final ACTIONS (partial ones and stale replies are skipped)."""
        for refusal in self.server.submit(self.id, infer, self._replies.put):
            self._replies.put(refusal)
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                reply = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise DeadlineExceeded(
                    f"no final ACTIONS for request {infer.request_id} within {self.timeout_s:g} s"
                ) from None
            if reply.request_id != infer.request_id:
                continue  # a reply to an earlier request (superseded)
            if isinstance(reply, Error):
                raise RemoteError(reply)
            if reply.final:
                return reply

    def close(self) -> None:
        """Forget this client's pending work (as a RESET)."""
        self.server.reset(self.id)
