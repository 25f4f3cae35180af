"""Executors against the in-process fake policy in simulated time: each mode's request time, state and switch."""

from __future__ import annotations

import heapq
from dataclasses import FrozenInstanceError

import numpy as np
import pytest

from robot_io.control import ControlLoop, SimulatedClock
from robot_io.executors import DelayEstimator, ExecutorConfig, make_executor
from robot_io.protocol import Actions, CameraSpec, Error, ErrorCode, Infer, Metadata
from vlash.sim.policy_link import SimulatedPolicyLink

PERIOD = 0.1  # 10 Hz: latencies below read as whole steps
H, J = 30, 2


def plan(infer: Infer) -> np.ndarray:
    """actions[i] = [100 * request_id + i, i]: every action names its chunk and index."""
    i = np.arange(H, dtype=np.float32)
    return np.stack([100.0 * infer.request_id + i, i], axis=1)


def metadata(h: int = H) -> Metadata:
    return Metadata("fake", [CameraSpec("cam", 4, 4)], J, J, h, 10.0, "fp32", "fake", 10, "constant", False)


class Harness:
    """Runs an executor for `steps` ticks on a simulated clock; the observed state at step k is [k, -k]."""

    def __init__(self, latency_s=0.25, stream=(), **config):
        self.clock = SimulatedClock()
        self.client = SimulatedPolicyLink(plan, metadata(), self.clock, latency_s, stream)
        self.executor = make_executor(self.client, ExecutorConfig(**config), PERIOD, self.clock)
        self.executor.start()
        self.actions: dict[int, np.ndarray | None] = {}

    def run(self, steps: int, on_tick=None) -> Harness:
        loop = ControlLoop(1 / PERIOD, self.clock)

        def tick(t):
            if on_tick is not None:
                on_tick(t.index, self)
            obs = {"state": np.array([t.index, -t.index], np.float32), "images": {"cam": np.zeros((4, 4, 3), np.uint8)}}
            self.actions[t.index] = self.executor.tick(t.index, obs, t.start_ns)

        loop.run(tick, max_ticks=steps, idle=self.executor.receive)
        return self

    def chunk_at(self, step):  # (request id, chunk index) of the action commanded at `step`
        a = self.actions[step]
        return None if a is None else (int(a[0] // 100), int(round(a[1])))


def test_first_chunk_is_sync_then_naive_switches_at_index_d_with_the_stale_state():
    h = Harness(mode="naive", execution_horizon=5, initial_delay=3).run(12)
    assert [h.actions[k] for k in range(3)] == [None, None, None]  # waiting for the first chunk (0.25 s)
    assert h.chunk_at(3) == (1, 0) and h.chunk_at(7) == (1, 4)
    second = h.client.requests[1]
    assert second.step_index == 3 + 5 - 3  # launched s - d steps after the first chunk started
    np.testing.assert_array_equal(second.state, [5, -5])  # the observed (stale) state
    assert second.future_state is None and second.prefix is None and second.delay_steps == 3
    assert h.chunk_at(8) == (2, 3)  # switch at k + d, running index d (index 0 = the request time)
    assert h.executor.records[1].switch_step == 8 and h.executor.records[1].switch_index == 3
    assert h.executor.counts.missed_deadlines == 0


def test_vlash_sends_the_last_committed_action_as_future_state_and_runs_index_0():
    h = Harness(mode="vlash", execution_horizon=5, initial_delay=3).run(12)
    second = h.client.requests[1]
    assert second.step_index == 5 and second.delay_steps == 3
    np.testing.assert_array_equal(second.future_state, plan(h.client.requests[0])[4])  # commanded at step 7
    np.testing.assert_array_equal(h.actions[7], plan(h.client.requests[0])[4])
    assert h.chunk_at(8) == (2, 0) and h.chunk_at(9) == (2, 1)


def test_vlash_delta_actions_roll_the_state_forward_by_the_executed_increments():
    h = Harness(mode="vlash", execution_horizon=5, initial_delay=3, action_kind="delta").run(9)
    first, second = plan(h.client.requests[0]), h.client.requests[1]
    expected = np.array([5, -5], np.float32) + first[2:5].sum(axis=0)  # indices run at steps 5, 6, 7
    np.testing.assert_allclose(second.future_state, expected)


def test_delta_actions_with_an_action_stride_command_the_sum_of_q_increments():
    h = Harness(mode="naive", execution_horizon=4, initial_delay=2, action_kind="delta", action_stride=2).run(4)
    first = plan(h.client.requests[0])
    np.testing.assert_allclose(h.actions[3], first[0] + first[1])  # chunk started at step 3 (0.25 s)


def test_prefix_sends_the_committed_prefix_and_gets_it_back_bit_exact():
    h = Harness(mode="prefix", execution_horizon=5, initial_delay=3).run(12)
    first, second = plan(h.client.requests[0]), h.client.requests[1]
    np.testing.assert_array_equal(second.prefix, first[2:5])  # the actions of steps 5, 6, 7
    assert second.delay_steps == 3 and second.schedule == "constant" and second.future_state is None
    np.testing.assert_array_equal(h.actions[7], first[4])
    np.testing.assert_array_equal(h.actions[8], plan(second)[3])  # new chunk from index d
    assert h.executor.records[1].prefix_len == 3


def test_an_action_stride_executes_every_qth_action_and_scales_the_overlap():
    h = Harness(mode="prefix", execution_horizon=5, initial_delay=2, action_stride=2, latency_s=0.15).run(12)
    assert [h.chunk_at(k) for k in (2, 3, 4)] == [(1, 0), (1, 2), (1, 4)]
    second = h.client.requests[1]
    assert second.step_index == 2 + 5 - 2
    np.testing.assert_array_equal(second.prefix, plan(h.client.requests[0])[6:10])  # d * q = 4 committed indices
    assert h.chunk_at(7) == (2, 4) and h.chunk_at(8) == (2, 6)  # switch index d * q


def test_faster_switches_on_partial_actions_before_the_chunk_is_final():
    stream = [(0.3, 2), (0.6, 10)]  # first new actions final after 30% of the latency
    h = Harness(mode="faster", execution_horizon=5, initial_delay=3, stream=stream, latency_s=0.25).run(12)
    first = h.executor.records[0]
    assert first.switch_step == 1 and first.ready_ms == pytest.approx(75.0)  # partial at 0.075 s
    assert h.executor.delay_steps() == 1  # d from the time to the first needed action, not the latency
    second = h.executor.records[1]
    assert second.request_step == 1 + 5 - 1 and second.prefix_len == 1
    assert h.client.requests[1].schedule == "horizon-aware"
    assert second.switch_step == 6 and second.switch_index == 1
    assert second.reply_step > second.switch_step  # the final message came later
    assert h.executor.counts.missed_deadlines == 0


def test_a_streaming_chunk_superseded_before_its_final_message_is_marked_and_keeps_running():
    stream = [(0.3, 2), (0.6, 10)]

    def drop_second(step, harness):
        if step == 7:  # request 2 took over at step 6 on its partial actions; its final message is still due
            harness.client._queue.clear()
            harness.client._push(harness.clock.now_ns(), Error(ErrorCode.DROPPED, "newer request", 2))

    h = Harness(mode="faster", execution_horizon=5, initial_delay=3, stream=stream, latency_s=0.25)
    h.run(9, on_tick=drop_second)
    second = h.executor.records[1]
    assert second.switch_step == 6 and second.latency_ms is None
    assert second.stream_cut == "dropped" and second.status == "running"
    assert h.chunk_at(8) == (2, 3)  # it keeps running on the actions that arrived
    assert h.executor.counts.dropped == 1 and h.executor.records[0].stream_cut is None


def test_a_reset_while_the_running_chunk_streams_is_marked_and_its_late_replies_are_stale():
    stream = [(0.3, 2), (0.6, 10)]

    def new_episode(step, harness):
        if step == 7:  # request 2 took over at step 6 on its partial actions; its final message is due at 7.5
            harness.executor.reset()

    h = Harness(mode="faster", execution_horizon=5, initial_delay=3, stream=stream, latency_s=0.25)
    h.run(9, on_tick=new_episode)
    second = h.executor.records[1]
    assert second.switch_step == 6 and second.latency_ms is None
    assert second.stream_cut == "reset" and second.status == "done"
    assert h.executor.counts.stale_replies >= 1 and h.executor.records[2].mode == "sync"  # the episode starts afresh


class NonCancellingClient(SimulatedPolicyLink):
    """A server that keeps streaming a request after the same client's next one arrives (the protocol allows it;
    vlash's server cancels it and says DROPPED)."""

    def submit(self, infer: Infer) -> None:
        streaming = [item for item in self._queue if isinstance(item[2], Actions)]
        super().submit(infer)
        self._queue = [item for item in self._queue if not isinstance(item[2], Error)] + streaming
        heapq.heapify(self._queue)


def test_a_chunk_replaced_while_it_still_streams_is_marked_and_its_late_replies_are_stale():
    h = Harness(mode="faster", execution_horizon=2, initial_delay=1, stream=[(0.1, 10)], latency_s=0.6)
    h.client = NonCancellingClient(plan, metadata(), h.clock, 0.6, [(0.1, 10)])
    h.executor.client = h.client
    h.run(8)
    ran = [r for r in h.executor.records if r.switch_step is not None]
    assert len(ran) >= 3 and h.executor.counts.dropped == 0
    assert all(r.stream_cut == "replaced" and r.latency_ms is None for r in ran[:-1])
    assert h.executor.counts.stale_replies >= 1


def test_sync_holds_while_waiting_and_runs_each_chunk_from_index_0():
    h = Harness(mode="sync", execution_horizon=4).run(16)
    assert h.chunk_at(3) == (1, 0) and h.chunk_at(6) == (1, 3)
    assert h.client.requests[1].step_index == 7
    assert [h.actions[k] for k in (7, 8, 9)] == [None, None, None]
    assert h.chunk_at(10) == (2, 0)
    assert h.executor.counts.waiting_steps == 3 + 3 + 2 and h.executor.counts.missed_deadlines == 0


def test_online_delay_is_the_p95_of_recent_latencies_in_steps():
    latencies = iter([0.05, 0.05, 0.05, 0.05, 0.35] + [0.05] * 20)
    h = Harness(mode="naive", execution_horizon=6, initial_delay=2, latency_s=lambda infer: next(latencies))
    h.run(3)
    assert h.executor.delay_steps() == 1  # one measured 0.05 s latency
    h.run(40)
    samples = h.executor.delay.samples
    assert h.executor.delay_steps() == int(np.ceil(np.percentile(samples, 95) / PERIOD - 1e-9))


def test_delay_estimator_window_clamp_and_initial_value():
    est = DelayEstimator(0.1, initial=3, window=4)
    assert est.steps(max_delay=5) == 3
    for latency in (0.9, 0.1, 0.1, 0.1, 0.1):
        est.add(latency)
    assert len(est.samples) == 4 and est.steps(5) == 1  # 0.9 fell out of the window
    est.add(0.9)
    assert est.steps(max_delay=5) == 5 and est.clamped == 1  # p95 ~0.78 s -> 8 steps, clamped
    assert DelayEstimator(0.1, initial=3, adapt=False).steps(5) == 3


def test_a_late_reply_takes_over_on_arrival_at_the_time_aligned_index():
    latencies = iter([0.25, 0.55, 0.25, 0.25])
    h = Harness(mode="naive", execution_horizon=5, initial_delay=3, adapt_delay=False,
                latency_s=lambda infer: next(latencies)).run(13)  # fmt: skip
    rec = h.executor.records[1]
    assert rec.request_step == 5 and rec.planned_switch_step == 8
    assert rec.switch_step == 11 and rec.switch_index == 6  # arrived at 1.05 s: index (11 - 5) * q
    assert h.chunk_at(10) == (1, 7)  # the old chunk kept running meanwhile


def test_dropped_and_failed_requests_are_counted_and_retried():
    h = Harness(mode="naive", execution_horizon=5, initial_delay=3, retry_after_s=0.3)

    def inject(step, harness):
        if step == 6:  # the second request (made at step 5) is dropped by the server
            harness.client._queue.clear()
            harness.client._push(harness.clock.now_ns(), Error(ErrorCode.DROPPED, "newer request", 2))
        if step == 12:  # the fourth (re-sent one switched at 9, the next made at 11) fails
            harness.client._queue.clear()
            harness.client._push(harness.clock.now_ns(), Error(ErrorCode.INTERNAL, "model failed", 4))

    h.run(20, on_tick=inject)
    statuses = [r.status for r in h.executor.records]
    assert statuses[1] == "dropped" and statuses[3] == "error"
    assert h.client.requests[2].step_index == 6  # a dropped request is re-sent at once
    assert h.client.requests[3].step_index == 11
    assert h.client.requests[4].step_index == 12 + 3  # after an error: back off retry_after_s
    assert h.executor.counts.dropped == 1 and h.executor.counts.errors == 1


def test_a_silent_server_times_out_and_the_executor_asks_again():
    h = Harness(mode="vlash", execution_horizon=5, initial_delay=3, request_timeout_s=0.5)
    h.client.replying = False
    h.run(12)
    assert h.executor.counts.timeouts >= 1
    assert [r.request_step for r in list(h.executor.records)[:2]] == [0, 6]  # 0.5 s timeout -> re-sent at step 6
    assert all(a is None for a in h.actions.values())


def test_counts_are_frozen_snapshots_and_a_misspelt_count_raises():
    h = Harness(mode="naive", execution_horizon=5, initial_delay=3).run(6)
    early = h.executor.counts
    h.run(20)
    assert early.requests == 2 and h.executor.counts.requests > early.requests  # the early snapshot did not move
    assert early.waiting_steps == 3 and h.executor.counts.waiting_steps == 3
    with pytest.raises(AttributeError):
        early.plus(starved_steps=1)
    with pytest.raises(FrozenInstanceError):
        early.requests = 0


def test_config_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="mode must be one of"):
        ExecutorConfig(mode="fancy")
    with pytest.raises(ValueError, match="state_source .commanded. needs absolute"):
        ExecutorConfig(action_kind="velocity", state_source="commanded")
    with pytest.raises(ValueError, match="initial_delay 6 > execution_horizon 5"):
        ExecutorConfig(mode="naive", execution_horizon=5, initial_delay=6)
    with pytest.raises(ValueError, match=r"\(s \+ 1\) \* q"):
        ExecutorConfig(execution_horizon=20, action_stride=2).check_chunk_length(30)
