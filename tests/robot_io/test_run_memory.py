"""A long run keeps bounded memory: the runner retains the most recent ticks, chunk records and latencies only
(simulated clock, PointArm, fake policy link), and hands every tick and every record to its traces exactly once."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np

from robot_io.control import SimulatedClock
from robot_io.executors import ExecutorConfig
from robot_io.runner import RunConfig, Runner
from tests.fakes import PointArm, point_metadata, ramp_planner
from vlash.sim.policy_link import SimulatedPolicyLink

RATE = 30.0


class CountingTrace:
    """A TraceSink that keeps counts, not rows."""

    wants_ticks = True

    def __init__(self) -> None:
        self.ticks, self.last_step, self.chunk_ids, self.summaries = 0, -1, [], []

    def tick(self, row) -> None:
        assert row["step"] == self.last_step + 1  # every tick, in order
        self.ticks, self.last_step = self.ticks + 1, row["step"]

    def chunk(self, record) -> None:
        self.chunk_ids.append(record.chunk_id)

    def summary(self, summary) -> None:
        self.summaries.append(summary)


def long_runner(ticks: int, status=None, traces=()) -> Runner:
    clock = SimulatedClock()
    client = SimulatedPolicyLink(ramp_planner(20), point_metadata(), clock, latency_s=0.05, history=4)
    executor = ExecutorConfig("vlash", execution_horizon=5, initial_delay=2, record_window=16)
    config = RunConfig(executor, rate_hz=RATE, duration_s=ticks / RATE, trace_ticks=64, stats_window=32,
                       status_every_s=1.0)  # fmt: skip
    return Runner(PointArm(episode_steps=2950), client, config, clock, status, traces)


def test_a_long_run_keeps_only_the_recent_ticks_records_and_latencies():
    trace = CountingTrace()
    runner = long_runner(3000, traces=[trace])
    result = runner.run()
    s = result.summary
    assert s.ticks == 3000 and s.chunks > 400 and s.episodes == 0
    assert len(result.records) == len(runner.executor.records) == 16  # the most recent records
    assert [r.chunk_id for r in result.records] == list(range(s.requests - 15, s.requests + 1))
    assert np.array_equal(result.steps, np.arange(3000 - 64, 3000))  # the most recent ticks, oldest first
    assert result.commands.shape == (64, 2) and np.flatnonzero(result.resets).tolist() == [2950 - 2936]
    assert s.latency_p50_ms == s.latency_p99_ms == 50.0 and s.missed_deadlines == 0
    # the traces got everything: each tick, each record exactly once, then the summary
    assert trace.ticks == 3000 and sorted(trace.chunk_ids) == list(range(1, s.requests + 1))
    assert trace.summaries == [s.as_dict()]


def test_the_runner_s_memory_does_not_grow_with_the_run_length():
    samples: list[int] = []  # traced bytes allocated by robot_io (not by the fakes), once per simulated second

    def sample(status) -> None:
        gc.collect()  # what is left is what the run keeps (cyclic garbage waits for the collector otherwise)
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*robot_io*")])
        samples.append(sum(stat.size for stat in snapshot.statistics("filename")))

    runner = long_runner(900, status=sample)
    gc.collect()
    gc.freeze()  # what earlier tests left on the heap is not scanned by each sample's collection
    tracemalloc.start()
    try:
        runner.run()
    finally:
        tracemalloc.stop()
        gc.unfreeze()
    assert len(samples) >= 27
    # after the first 10 s (windows filled, buffers warm) 600 more ticks and ~125 chunks allocate nothing that
    # stays; keeping every tick (~450 B) and record (~1 KB) would add ~0.4 MB
    growth = max(samples[10:]) - samples[10]
    assert growth < 16_000, (samples[10], samples[-1])
