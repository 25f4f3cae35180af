"""Executor features the evaluation harness relies on (vlash eval drives these executors): guided RTC's request,
the ensemble, velocity actions, the commanded state, a zero-latency link, and a server that stops sampling early.
The harness (Harness, plan, metadata) is test_executors.py's: a 10 Hz simulated clock, actions that name their
chunk and index, observed state [k, -k] at step k."""

from __future__ import annotations

import numpy as np
import pytest

from robot_io.executors import ExecutorConfig
from tests.robot_io.test_executors import PERIOD, Harness, metadata, plan
from vlash.sim.policy_link import PlannedChunk, SimulatedPolicyLink


def test_rtc_sends_the_running_chunks_leftover_as_guidance_and_delay_d_times_q():
    h = Harness(mode="rtc", execution_horizon=5, initial_delay=2, action_stride=2, latency_s=0.15).run(10)
    first, second = plan(h.client.requests[0]), h.client.requests[1]
    assert h.executor.records[0].switch_step == 2 and second.step_index == 2 + 5 - 2
    np.testing.assert_array_equal(second.guidance, first[6:])  # index (5 - 2) * 2 runs at step 5: the leftover
    assert second.schedule == "constant" and second.delay_steps == 2 * 2 and second.execution_horizon == 5 * 2
    assert second.prefix is None and second.future_state is None
    np.testing.assert_array_equal(second.state, [5, -5])
    assert h.chunk_at(7) == (2, 4)  # switch at k + d running index d * q, like naive


def _ensemble(decay: float, every: int = 1) -> Harness:
    return Harness(mode="ensemble", execution_horizon=5, initial_delay=2, latency_s=0.25, ensemble_every=every,
                   ensemble_decay=decay).run(20)  # fmt: skip


def _expected_mix(h: Harness, step: int, decay: float) -> tuple[np.ndarray, int]:
    """ACT's average at `step` of every chunk that took over and still has an action then, oldest first."""
    actions = []
    for record, infer in zip(h.executor.records, h.client.requests, strict=False):
        if record.switch_step is None or record.switch_step > step:
            continue
        index = record.switch_index + (step - record.switch_step)
        if index < len(plan(infer)):
            actions.append(plan(infer)[index])
    weights = np.exp(-decay * np.arange(len(actions)))
    return (weights / weights.sum()) @ np.stack(actions), len(actions)


def test_ensemble_averages_the_live_chunks_with_act_weights():
    h = _ensemble(decay=0.5)
    for step in (9, 15, 19):
        expected, live = _expected_mix(h, step, 0.5)
        assert live >= 3
        np.testing.assert_allclose(h.actions[step], expected, rtol=1e-6)
    assert not np.allclose(h.actions[15], _expected_mix(h, 15, 0.0)[0])  # the weights matter
    np.testing.assert_allclose(_ensemble(decay=0.0).actions[15], _expected_mix(h, 15, 0.0)[0], rtol=1e-6)


def test_ensemble_keeps_at_most_one_request_in_flight():
    h = _ensemble(decay=0.01, every=1)  # asked every step, but a reply takes 0.25 s: 3 ticks
    records = list(h.executor.records)
    assert [r.request_step for r in records[:4]] == [0, 3, 6, 9]
    assert all(b.request_step >= a.reply_step for a, b in zip(records, records[1:], strict=False))
    assert h.executor.counts.dropped == 0 and h.executor.counts.stale_replies == 0  # nothing was superseded
    assert [r.request_step for r in list(_ensemble(0.01, every=5).executor.records)[:3]] == [0, 5, 10]


def test_velocity_actions_roll_the_future_state_by_period_times_the_executed_rates():
    h = Harness(mode="vlash", execution_horizon=5, initial_delay=3, action_kind="velocity").run(9)
    first, second = plan(h.client.requests[0]), h.client.requests[1]
    expected = np.array([5, -5], np.float32) + PERIOD * first[2:5].sum(axis=0)  # indices run at steps 5, 6, 7
    np.testing.assert_allclose(second.future_state, expected, rtol=1e-6)


def test_velocity_actions_with_an_action_stride_command_the_sum_of_q_rates():
    h = Harness(mode="naive", execution_horizon=4, initial_delay=2, action_kind="velocity", action_stride=2).run(5)
    first = plan(h.client.requests[0])
    np.testing.assert_allclose(h.actions[3], first[0] + first[1])  # a rate per index: q of them in one step
    np.testing.assert_allclose(h.actions[4], first[2] + first[3])


def test_state_source_commanded_sends_the_last_command():
    h = Harness(mode="naive", execution_horizon=5, initial_delay=3, state_source="commanded").run(9)
    first, second = h.client.requests[:2]
    np.testing.assert_array_equal(first.state, [0, 0])  # nothing commanded yet: the observed state
    assert second.step_index == 5
    np.testing.assert_array_equal(second.state, h.actions[4])  # not the observed [5, -5]
    observed = Harness(mode="naive", execution_horizon=5, initial_delay=3).run(9).client.requests[1]
    np.testing.assert_array_equal(observed.state, [5, -5])


@pytest.mark.parametrize("kind", ["delta", "velocity"])
def test_state_source_commanded_is_refused_for_relative_actions(kind):
    with pytest.raises(ValueError, match="state_source 'commanded' needs absolute actions"):
        ExecutorConfig(action_kind=kind, state_source="commanded")


def test_a_zero_latency_reply_runs_in_the_tick_of_its_request():
    h = Harness(mode="naive", execution_horizon=5, initial_delay=1, latency_s=0.0).run(12)
    assert h.chunk_at(0) == (1, 0)  # no hold at all
    assert h.executor.delay_steps() == 0 and h.client.requests[1].step_index == 5
    assert h.chunk_at(5) == (2, 0) and h.chunk_at(10) == (3, 0)  # index d * q = 0
    assert h.executor.counts.waiting_steps == 0 and h.executor.counts.missed_deadlines == 0
    sync = Harness(mode="sync", execution_horizon=4, latency_s=0.0).run(9)
    assert all(a is not None for a in sync.actions.values()) and sync.chunk_at(4) == (2, 0)


def _stopping_early(h: Harness, rows: int, pieces=()) -> Harness:
    """Replace the link by one whose final message carries only `rows` rows (the server's early stop)."""
    h.client = SimulatedPolicyLink(lambda infer: PlannedChunk(plan(infer), pieces, rows), metadata(), h.clock, 0.25)
    h.executor.client = h.client
    return h


def test_a_final_message_with_fewer_rows_completes_the_request_and_running_past_them_starves():
    h = _stopping_early(Harness(mode="sync", execution_horizon=12), rows=8).run(15)
    first = h.executor.records[0]
    assert first.latency_ms == pytest.approx(250, abs=1) and first.switch_step == 3 and first.stream_cut is None
    assert h.chunk_at(10) == (1, 7) and h.actions[11] is None  # rows 0..7 ran at steps 3..10
    assert h.executor.counts.missed_deadlines == 4 and h.executor.counts.waiting_steps == 3  # 11..14; 0..2
    assert len(h.client.requests) == 1  # sync asks again after s = 12 steps, at 15


def test_a_streamed_reply_that_stops_early_is_complete_once_its_final_message_arrives():
    h = Harness(mode="faster", execution_horizon=5, initial_delay=1)
    h = _stopping_early(h, rows=6, pieces=((0.3, 2),)).run(6)
    first = h.executor.records[0]
    assert first.switch_step == 1 and first.latency_ms == pytest.approx(250, abs=1)  # took over on the piece
    assert h.executor.streaming is None and first.stream_cut is None  # the short final message completed it
    assert h.executor.current.final.sum() == 6


def test_faster_asks_again_when_its_prefix_was_not_final_at_the_due_step():
    """The server stops at prefix + s rows. Request 1's row 1 arrives at 0.3 s, after the due step 2 (s = d = 2), so
    the launch is deferred; from step 3 on the prefix window [index_at(k), + d) reaches past the rows the chunk has,
    and commits the hold (its last row) there instead of waiting for a row that never comes."""

    def planner(infer):
        c = 0 if infer.prefix is None else len(infer.prefix)
        return PlannedChunk(plan(infer), pieces=((0.3, c + 1), (0.6, c + 2)), rows=c + 2)

    h = Harness(mode="faster", execution_horizon=2, initial_delay=2)
    h.client = SimulatedPolicyLink(planner, metadata(), h.clock, 0.5)
    h.executor.client = h.client
    h.run(12)
    assert h.executor.records[0].switch_step == 2 and h.executor.delay_steps() == 2
    assert len(h.client.requests) > 1, f"no second request in 12 steps; deferred {h.executor.counts.deferred}x"
