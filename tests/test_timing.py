"""tests/timing.py: real-time tests take their rate and timeouts from the measured chunk latency."""

from __future__ import annotations

import math

import pytest

from tests.timing import Pace, measure_pace


class StepClock:
    """A clock that each fake request moves forward by its scripted latency."""

    def __init__(self, latencies_ms: list[float]) -> None:
        self.now_ns, self.latencies_ms = 0, list(latencies_ms)

    def __call__(self) -> int:
        return self.now_ns

    def serve(self, _: int) -> None:
        self.now_ns += round(self.latencies_ms.pop(0) * 1e6)


def test_the_pace_is_the_slowest_probe():
    clock = StepClock([70.0, 125.0, 90.0])
    pace = measure_pace(clock.serve, probes=3, clock_ns=clock)
    assert pace.chunk_s == pytest.approx(0.125) and pace.probes_ms == pytest.approx((70.0, 125.0, 90.0))
    assert "chunk 125 ms" in str(pace) and not clock.latencies_ms


def test_the_rate_is_nominal_while_a_chunk_fits_and_slows_down_with_the_latency():
    assert Pace(0.070).rate_hz(30.0, chunk_periods=4) == 30.0  # idle: 70 ms = 2.1 periods at 30 Hz
    loaded = Pace(0.800)  # load 5-9 on 2 cores
    assert loaded.rate_hz(30.0, chunk_periods=4) == pytest.approx(5.0)  # the chunk spans 4 periods, not 24
    assert loaded.seconds(4) == pytest.approx(3.2) and Pace(0.075).seconds(4) == pytest.approx(0.3)


@pytest.mark.parametrize("chunk_s", [0.0, -1.0, math.inf, math.nan])
def test_a_pace_needs_a_positive_finite_latency(chunk_s):
    with pytest.raises(ValueError, match="chunk_s"):
        Pace(chunk_s)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="probes"):
        measure_pace(lambda i: None, probes=0)
    with pytest.raises(ValueError, match="rate_hz"):
        Pace(0.1).rate_hz(30.0, chunk_periods=0)
