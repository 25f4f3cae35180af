"""Thread-safe counters of the policy server (the STATS reply and the periodic log line).

"clients" counts the clients heard from in the last CLIENT_IDLE_S seconds, at most MAX_CLIENTS of them: a
client is forgotten once idle that long (or once MAX_CLIENTS others were heard from since), so thousands of
short connections do not grow the server. The per-client latency percentiles follow the same rule (a client's
latencies go when it is forgotten), and STATS reports them for the MAX_CLIENT_ROWS clients heard from most recently
(a reply holds at most 256 counters). The queue's fairness and newest-wins state (vlash.server.jobs) lives with the
client's pending request and needs no memory of past clients.

Batching: every batch the model thread takes counts its size ("batches", the mean "batch_size_mean" and the
histogram "batch_size_<b>": batches of b since start) and each request's queue wait, receipt -> batch start
("queue_wait_p50_ms", "queue_wait_p99_ms").
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

import numpy as np

CLIENT_IDLE_S = 300.0  # a client not heard from for this long no longer counts in "clients"
MAX_CLIENTS = 1024  # identities remembered at most (the most recently heard from)
CLIENT_WINDOW = 100  # served requests kept per client for its latency percentiles
MAX_CLIENT_ROWS = 32  # clients whose latency percentiles a STATS reply carries (the most recently heard from)


class ServerStats:
    def __init__(
        self,
        window: int = 1000,
        client_idle_s: float = CLIENT_IDLE_S,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._start = clock()
        self._client_idle_s, self._max_clients = client_idle_s, max_clients
        self.counters: dict[str, int] = {
            "served": 0,  # requests answered with a final chunk
            "dropped": 0,  # requests superseded by a newer one of the same client
            "errors": 0,  # ERROR replies of any other kind
            "resets": 0,  # RESET messages handled
            "hellos": 0,  # handshakes
            "busy": 0,  # requests refused BUSY (no place in the queue); counted in "errors" too
            "busy_zeromq": 0,  # of which from ZeroMQ robots (the queue's shares: vlash.server.shares)
            "busy_in_process": 0,  # of which from in-process clients (the openpi endpoint's)
            "batches": 0,  # batches the model thread ran
        }
        self._clients: OrderedDict[bytes, float] = OrderedDict()  # identity -> last heard (clock), oldest first
        self._latency_ms: deque[float] = deque(maxlen=window)  # receipt -> final chunk, server side
        self._first_ms: deque[float] = deque(maxlen=window)  # receipt -> first final action
        self._queue_ms: deque[float] = deque(maxlen=window)  # receipt -> batch start
        self._batch_sizes: dict[int, int] = {}  # batch size -> batches of that size (at most max_batch entries)
        self._client_ms: dict[bytes, deque[float]] = {}  # identity (one of _clients) -> its latencies

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + n

    def client(self, identity: bytes) -> None:
        """`identity` was heard from now."""
        with self._lock:
            self._clients[identity] = self._clock()
            self._clients.move_to_end(identity)
            self._forget_idle()

    def _forget_idle(self) -> None:
        """Drop the clients idle for longer than client_idle_s, and the oldest past max_clients (lock held)."""
        oldest_kept = self._clock() - self._client_idle_s
        while self._clients and (
            len(self._clients) > self._max_clients or next(iter(self._clients.values())) < oldest_kept
        ):
            identity, _ = self._clients.popitem(last=False)
            self._client_ms.pop(identity, None)

    def served(self, latency_ms: float, first_action_ms: float, client: bytes | None = None) -> None:
        with self._lock:
            self.counters["served"] += 1
            self._latency_ms.append(latency_ms)
            self._first_ms.append(first_action_ms)
            if client in self._clients:  # a forgotten client's latency is not kept (bounded, see above)
                self._client_ms.setdefault(client, deque(maxlen=CLIENT_WINDOW)).append(latency_ms)

    def batch(self, queue_ms: list[float]) -> None:
        """The model thread started a batch of len(queue_ms) requests that waited `queue_ms` each."""
        with self._lock:
            self.counters["batches"] += 1
            self._batch_sizes[len(queue_ms)] = self._batch_sizes.get(len(queue_ms), 0) + 1
            self._queue_ms.extend(queue_ms)

    def snapshot(self, pending: int = 0) -> dict[str, int | float]:
        with self._lock:
            out: dict[str, int | float] = dict(self.counters)
            self._forget_idle()
            out["clients"] = len(self._clients)
            out["pending"] = pending
            out["uptime_s"] = round(self._clock() - self._start, 3)
            series = [("latency", self._latency_ms), ("first_action", self._first_ms), ("queue_wait", self._queue_ms)]
            recent = [c for c in reversed(self._clients) if c in self._client_ms][:MAX_CLIENT_ROWS]
            series += [(f"client_{client_label(c)}_latency", self._client_ms[c]) for c in recent]
            for name, values in series:
                if values:
                    arr = np.fromiter(values, float)
                    out[f"{name}_p50_ms"] = float(np.percentile(arr, 50))
                    out[f"{name}_p99_ms"] = float(np.percentile(arr, 99))
            if self._batch_sizes:
                total = sum(self._batch_sizes.values())
                out["batch_size_mean"] = sum(size * n for size, n in self._batch_sizes.items()) / total
                out.update({f"batch_size_{size}": n for size, n in sorted(self._batch_sizes.items())})
            return out

    def line(self, pending: int = 0) -> str:
        """One human-readable summary line."""
        s = self.snapshot(pending)
        lat = (
            f"latency p50 {s['latency_p50_ms']:.1f} ms p99 {s['latency_p99_ms']:.1f} ms"
            if "latency_p50_ms" in s
            else ""
        )
        batch = f"batch {s['batch_size_mean']:.2f} " if "batch_size_mean" in s else ""
        return (
            f"served {s['served']} dropped {s['dropped']} errors {s['errors']} busy {s['busy']} "
            f"clients {s['clients']} pending {s['pending']} {batch}{lat}".rstrip()
        )


def client_label(identity: bytes) -> str:
    """A short stable name of a client identity for counter keys (<= 64 chars with the key's other parts): its hex
    when short (ROUTER's own identities are 5 bytes), else a hash of it."""
    return identity.hex() if len(identity) <= 16 else hashlib.blake2s(identity, digest_size=8).hexdigest()
