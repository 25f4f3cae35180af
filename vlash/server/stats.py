"""Thread-safe counters of the policy server (the STATS reply and the periodic log line)."""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np


class ServerStats:
    def __init__(self, window: int = 1000) -> None:
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self.counters: dict[str, int] = {
            "served": 0,  # requests answered with a final chunk
            "dropped": 0,  # requests superseded by a newer one of the same client
            "errors": 0,  # ERROR replies of any other kind
            "resets": 0,  # RESET messages handled
            "hellos": 0,  # handshakes
        }
        self._clients: set[bytes] = set()
        self._latency_ms: deque[float] = deque(maxlen=window)  # receipt -> final chunk, server side
        self._first_ms: deque[float] = deque(maxlen=window)  # receipt -> first final action

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + n

    def client(self, identity: bytes) -> None:
        with self._lock:
            self._clients.add(identity)

    def served(self, latency_ms: float, first_action_ms: float) -> None:
        with self._lock:
            self.counters["served"] += 1
            self._latency_ms.append(latency_ms)
            self._first_ms.append(first_action_ms)

    def snapshot(self, pending: int = 0) -> dict[str, int | float]:
        with self._lock:
            out: dict[str, int | float] = dict(self.counters)
            out["clients"] = len(self._clients)
            out["pending"] = pending
            out["uptime_s"] = round(time.monotonic() - self._start, 3)
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
