"""Clocks for the control loop: `time.monotonic_ns` with a short final spin, or simulated time for tests."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic nanoseconds and a wait until a deadline (never a fixed-length sleep)."""

    def now_ns(self) -> int: ...

    def sleep_until(self, deadline_ns: int) -> None: ...


class MonotonicClock:
    """`time.monotonic_ns`; `sleep_until` sleeps to `spin_ns` before the deadline, then spins (sleep overshoots)."""

    def __init__(self, spin_ns: int = 500_000) -> None:
        if spin_ns < 0:
            raise ValueError(f"MonotonicClock.spin_ns must be >= 0, got {spin_ns}")
        self.spin_ns = spin_ns

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def sleep_until(self, deadline_ns: int) -> None:
        remaining = deadline_ns - time.monotonic_ns()
        if remaining > self.spin_ns:
            time.sleep((remaining - self.spin_ns) / 1e9)
        while time.monotonic_ns() < deadline_ns:
            pass


class SimulatedClock:
    """Simulated time: `sleep_until` jumps forward instantly; `advance` models work taking time.

    Makes the loop, the executors and the fake policy client deterministic and fast in tests."""

    spin_ns = 0

    def __init__(self, start_ns: int = 0) -> None:
        self._now = int(start_ns)

    def now_ns(self) -> int:
        return self._now

    def sleep_until(self, deadline_ns: int) -> None:
        self._now = max(self._now, int(deadline_ns))

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"SimulatedClock.advance: seconds must be >= 0, got {seconds}")
        self._now += round(seconds * 1e9)
