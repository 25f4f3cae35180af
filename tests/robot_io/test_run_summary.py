"""RunSummary.unusable_reason: a run in which the robot got no usable chunks is told apart from one that waited
by design (the first chunk of an episode, sync mode), on the summary's counters and on real (simulated) runs; holds
not by design above 10% are called out; every field has one printed name."""

from __future__ import annotations

import pytest

from robot_io.control import SimulatedClock
from robot_io.executors import ExecutorConfig
from robot_io.run_summary import LABELS, RunSummary
from robot_io.runner import RunConfig, Runner
from tests.fakes import PointArm, point_metadata, ramp_planner
from vlash.sim.policy_link import SimulatedPolicyLink


def summary(**counts) -> RunSummary:
    fields = {name: 0 for name in RunSummary.__dataclass_fields__}
    return RunSummary(**{**fields, "mode": "vlash", "rate_hz": 30.0, "duration_s": 10.0, **counts})


@pytest.mark.parametrize(
    ("counts", "reason"),
    [
        (dict(ticks=300, chunks=0, watchdog_holds=300, waiting_steps=300, requests=3, timeouts=2),
         "no chunk ran in 300 ticks (300 watchdog holds; 3 requests: 2 timed out, 0 errors, 0 dropped)"),
        (dict(ticks=300, chunks=2, watchdog_holds=200, waiting_steps=20, unexpected_holds=180, missed_deadlines=150,
              link_lost_steps=40),
         "the watchdog held 180 of 300 ticks (60%, more than 50%) not by design: 150 missed deadlines, "
         "40 ticks with the link lost"),
        (dict(ticks=0), "no control tick ran"),
        (dict(ticks=300, chunks=30, watchdog_holds=290, waiting_steps=290), None),  # sync at a slow server
        (dict(ticks=300, chunks=30, watchdog_holds=150, waiting_steps=0, unexpected_holds=150), None),  # 50%: at most
    ],
)  # fmt: skip
def test_unusable_reason(counts, reason):
    assert summary(**counts).unusable_reason() == reason


def test_the_threshold_is_the_caller_s():
    s = summary(ticks=100, chunks=5, watchdog_holds=20, unexpected_holds=20)
    assert s.unusable_reason(0.5) is None and "20 of 100 ticks (20%, more than 10%)" in s.unusable_reason(0.1)


def run(latency_s: float, mode: str = "vlash", replying: bool = True, duration_s: float = 2.0) -> RunSummary:
    clock = SimulatedClock()
    client = SimulatedPolicyLink(ramp_planner(20), point_metadata(), clock, latency_s)
    client.replying = replying
    config = RunConfig(ExecutorConfig(mode, execution_horizon=5, initial_delay=2), rate_hz=30.0, duration_s=duration_s)
    return Runner(PointArm(), client, config, clock).run().summary


def test_a_server_that_never_answers_gives_an_unusable_run_and_a_sync_run_at_a_slow_server_does_not():
    dead = run(0.05, replying=False)
    assert dead.chunks == 0 and dead.watchdog_holds == dead.ticks == 60
    assert dead.unusable_reason().startswith("no chunk ran in 60 ticks")
    slow_sync = run(0.3, mode="sync")  # each chunk: 5 steps run, ~10 waited for
    assert slow_sync.chunks >= 3 and slow_sync.watchdog_holds > 30 and slow_sync.unexpected_holds == 0
    assert slow_sync.unusable_reason() is None
    late = run(0.4)  # vlash with d0 = 2 but 12-step replies: every chunk runs out before the next arrives
    assert late.chunks >= 2 and late.missed_deadlines > 0 and late.unexpected_holds == late.missed_deadlines


def test_holds_not_by_design_above_10_percent_are_called_out_and_shown_with_their_share():
    s = summary(ticks=300, chunks=20, watchdog_holds=116, waiting_steps=20, unexpected_holds=96, missed_deadlines=80,
                link_lost_steps=16)  # fmt: skip
    assert s.unusable_reason() is None  # 32%: usable (below --max-hold-share), but not healthy
    assert s.hold_warning() == ("the watchdog held 96 of 300 ticks (32%, more than 10%) not by design: 80 missed "
                                "deadlines, 16 ticks with the link lost")  # fmt: skip
    assert s.cell("unexpected_holds") == "96 (32%)" and s.cell("watchdog_holds") == "116"
    healthy = summary(ticks=300, chunks=20, watchdog_holds=59, waiting_steps=59)  # every hold a first chunk's wait
    assert healthy.hold_warning() is None and healthy.cell("unexpected_holds") == "0 (0%)"
    assert summary(ticks=300, chunks=20, unexpected_holds=30).hold_warning() is None  # 10%: at most
    assert summary(ticks=0).hold_warning() is None and summary(ticks=0, ttfa_p50_ms=None).cell("ttfa_p50_ms") == "-"


def test_every_field_has_one_printed_name_and_the_holds_split_exactly():
    assert set(LABELS) == set(RunSummary.__dataclass_fields__) - {"mode", "rate_hz"}
    assert len(set(LABELS.values())) == len(LABELS)
    s = run(0.4)  # missed deadlines and first-chunk waits in one run
    assert s.watchdog_holds == s.waiting_steps + s.unexpected_holds and s.unexpected_holds > 0 < s.waiting_steps
