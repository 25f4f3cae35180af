"""Thread-safe counters of the policy server (the STATS reply and the periodic log line).

"clients" counts the clients heard from in the last CLIENT_IDLE_S seconds, at most MAX_CLIENTS of them: a
client is forgotten once idle that long (or once MAX_CLIENTS others were heard from since), so thousands of
short connections do not grow the server. Only this count forgets; the queue's fairness and newest-wins state
(vlash.server.jobs) lives with the client's pending request and needs no memory of past clients.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

import numpy as np

CLIENT_IDLE_S = 300.0  # a client not heard from for this long no longer counts in "clients"
MAX_CLIENTS = 1024  # identities remembered at most (the most recently heard from)


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
        }
        self._clients: OrderedDict[bytes, float] = OrderedDict()  # identity -> last heard (clock), oldest first
        self._latency_ms: deque[float] = deque(maxlen=window)  # receipt -> final chunk, server side
        self._first_ms: deque[float] = deque(maxlen=window)  # receipt -> first final action

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
            self._clients.popitem(last=False)

    def served(self, latency_ms: float, first_action_ms: float) -> None:
        with self._lock:
            self.counters["served"] += 1
            self._latency_ms.append(latency_ms)
            self._first_ms.append(first_action_ms)

    def snapshot(self, pending: int = 0) -> dict[str, int | float]:
        with self._lock:
            out: dict[str, int | float] = dict(self.counters)
            self._forget_idle()
            out["clients"] = len(self._clients)
            out["pending"] = pending
            out["uptime_s"] = round(self._clock() - self._start, 3)
            for name, values in (("latency", self._latency_ms), ("first_action", self._first_ms)):
                if values:
                    arr = np.fromiter(values, float)
                    out[f"{name}_p50_ms"] = float(np.percentile(arr, 50))
                    out[f"{name}_p99_ms"] = float(np.percentile(arr, 99))
            return out

    def line(self, pending: int = 0) -> str:
        """One human-readable summary line."""
        s = self.snapshot(pending)
        lat = (
            f"latency p50 {s['latency_p50_ms']:.1f} ms p99 {s['latency_p99_ms']:.1f} ms"
            if "latency_p50_ms" in s
            else ""
        )
        return (
            f"served {s['served']} dropped {s['dropped']} errors {s['errors']} clients {s['clients']} "
            f"pending {s['pending']} {lat}".rstrip()
        )
