"""Bounds for real-time tests, sized from the speed this machine has now, measured by the test itself.

A test over real sockets in real time runs the same code 5-10x slower on a loaded 2-core machine than on an idle
one (the shipped pi05-tiny-sim chunk: ~70 ms idle, 300-800 ms at load 5-9), so a constant that fits one breaks on
the other: a 0.3 s reply timeout is 4 chunks idle and less than one loaded; a 3 s run holds an episode at 30 Hz
idle and none when the first chunk takes 0.8 s and the loop misses deadlines. Such a test measures the served
chunk latency first (`measure_pace`) and takes every duration from the `Pace`: the control rate (a chunk spans
at most a given number of control periods, so the scenario in control steps is the same on any machine), timeouts
and back-offs as multiples of the latency, run budgets in control steps. A bound is scaled, never loosened by a
constant. Light: no torch, no ZeroMQ (the robot side's tests use it too).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Pace:
    """How fast a chunk is served right now; every real-time quantity of a test is derived from it."""

    chunk_s: float  # the slowest probe: request sent -> final reply received, seconds
    probes_ms: tuple[float, ...] = ()  # every probe's latency, for failure messages

    def __post_init__(self) -> None:
        if not (math.isfinite(self.chunk_s) and self.chunk_s > 0):
            raise ValueError(f"Pace.chunk_s must be a positive number of seconds, got {self.chunk_s!r}")

    def rate_hz(self, nominal_hz: float, chunk_periods: float) -> float:
        """`nominal_hz`, or slower so that one chunk's latency spans at most `chunk_periods` control periods."""
        if not (nominal_hz > 0 and chunk_periods > 0):
            raise ValueError(f"Pace.rate_hz needs positive arguments, got {nominal_hz!r}, {chunk_periods!r}")
        return min(nominal_hz, chunk_periods / self.chunk_s)

    def seconds(self, chunks: float) -> float:
        """How long `chunks` chunk latencies take (timeouts, back-offs)."""
        return chunks * self.chunk_s

    def __str__(self) -> str:
        probes = ", ".join(f"{ms:.0f}" for ms in self.probes_ms)
        return f"chunk {self.chunk_s * 1e3:.0f} ms (probes: {probes} ms)"


def measure_pace(
    infer: Callable[[int], object], probes: int = 5, clock_ns: Callable[[], int] = time.monotonic_ns
) -> Pace:
    """Time `probes` blocking requests `infer(i)` (i = 0, 1, ...): the Pace of the slowest. Call it right before
    the timed part of the test, with the requests the test will send (a costlier kind of request needs its own
    pace), on the same server: the machine's load changes from one test to the next."""
    if not (isinstance(probes, int) and probes >= 1):
        raise ValueError(f"measure_pace needs probes >= 1, got {probes!r}")
    latencies_ms = []
    for i in range(probes):
        start = clock_ns()
        infer(i)
        latencies_ms.append((clock_ns() - start) / 1e6)
    return Pace(max(latencies_ms) / 1e3, tuple(latencies_ms))
