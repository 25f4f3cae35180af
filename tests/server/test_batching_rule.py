"""The gathering rule (vlash.server.batching) on a simulated clock: the model thread waits for more requests only
while the oldest one would end less than one control step later than alone, within batch_wait and max_batch."""

from __future__ import annotations

import pytest

from vlash.server.batching import BatchGatherer, ServiceTimes

T = 0.020  # a 50 Hz robot


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def gatherer(clock: FakeClock, max_batch: int = 4, batch_wait_s: float = 0.050, **measured) -> BatchGatherer:
    """`measured`: L1=..., L2=... seconds recorded for batches of that size."""
    rule = BatchGatherer(max_batch, batch_wait_s, T, clock=clock)
    for name, seconds in measured.items():
        rule.measured(int(name[1:]), seconds)
    return rule


def test_a_full_batch_is_taken_at_once():
    clock = FakeClock()
    rule = gatherer(clock)
    assert rule.wait_s(clock.now, 4) == 0.0 and rule.wait_s(clock.now, 5) <= 0
    assert rule.wait_s(clock.now, 3) > 0


def test_before_any_measurement_only_batch_wait_and_the_control_period_bound_the_wait():
    clock = FakeClock()
    t0 = clock.now
    rule = gatherer(clock, batch_wait_s=0.005)
    assert rule.wait_s(t0, 1) == pytest.approx(0.005)
    clock.now = t0 + 0.004
    assert rule.wait_s(t0, 1) == pytest.approx(0.001)
    clock.now = t0 + 0.005
    assert rule.wait_s(t0, 1) <= 0
    long_wait = gatherer(clock, batch_wait_s=0.5)  # no cost estimate: T itself still bounds the wait
    clock.now = t0 + T - 0.001
    assert long_wait.wait_s(t0, 1) > 0
    clock.now = t0 + T
    assert long_wait.wait_s(t0, 1) <= 0


def test_the_wait_stops_once_the_oldest_request_would_lose_a_control_step():
    clock = FakeClock()
    t0 = clock.now
    rule = gatherer(clock, L1=0.010, L2=0.018)  # a batch of 2 ends 8 ms later than one request alone
    clock.now = t0 + 0.0119  # 11.9 ms waited + 8 ms = 19.9 ms < T
    assert rule.wait_s(t0, 1) > 0
    clock.now = t0 + 0.0121  # 20.1 ms: the oldest would finish more than one control step late
    assert rule.wait_s(t0, 1) <= 0
    # with two pending, a third is not measured yet: L(3) counts as L(1), so T and batch_wait bound the wait
    assert rule.wait_s(t0, 2) == pytest.approx(T - 0.0121)  # > 0: it waits on


def test_a_batch_that_costs_more_than_a_control_step_is_never_waited_for():
    clock = FakeClock()
    rule = gatherer(clock, L1=0.010, L2=0.035)
    assert rule.wait_s(clock.now, 1) == pytest.approx(T - 0.025)  # < 0: taken at once


def test_a_size_without_a_measurement_of_one_request_alone_has_no_cost_estimate():
    clock = FakeClock()
    rule = gatherer(clock, batch_wait_s=0.010, L2=0.5)
    assert rule.wait_s(clock.now, 1) == pytest.approx(0.010)


def test_service_times_are_a_running_median_per_size():
    times = ServiceTimes(window=3)
    assert times.estimate(1) is None and times.extra_s(2) == 0.0
    for seconds in (0.010, 0.011, 1.0):  # one outlier (a stall) does not move the median
        times.record(1, seconds)
    assert times.estimate(1) == pytest.approx(0.011)
    for seconds in (0.020, 0.020, 0.020):  # the window keeps the last 3: the old ones are gone
        times.record(1, seconds)
    times.record(2, 0.030)
    assert times.estimate(1) == pytest.approx(0.020) and times.extra_s(2) == pytest.approx(0.010)
    assert times.extra_s(3) == 0.0  # L(3) not measured: counts as L(1)


def test_the_shared_batch_ends_within_a_control_period_of_one_request_alone():
    clock = FakeClock()
    assert gatherer(clock).shared_size() == 4  # nothing measured: no cost known
    assert gatherer(clock, L1=0.050, L4=0.300).shared_size() == 1  # a CPU: L(2) ~ 0.133 by the straight line
    assert gatherer(clock, L1=0.050, L2=0.060, L4=0.300).shared_size() == 2  # L(3) ~ 0.18: 0.13 over L(1)
    assert gatherer(clock, L1=0.050, L4=0.055).shared_size() == 4  # a GPU: a batch costs about one request
    assert gatherer(clock, L1=0.050, L2=0.055).shared_size() == 4  # no size above 2 measured: counts as L(1)
