"""When the server goes silent (simulated clock, a fake link that stops replying): the link counts as lost after
link_timeout_s without any message while a reply is owed; "finish-chunk" runs the chunk out, "hold" holds within
one period; replies that return start afresh. Waits while the link is lost are never waits by design."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from robot_io.control import SimulatedClock
from robot_io.executors import ExecutorConfig
from robot_io.executors.link import LinkWatch
from robot_io.runner import RunConfig, Runner
from tests.fakes import PointArm, point_metadata, ramp_planner
from vlash.sim.policy_link import SimulatedPolicyLink

RATE, H = 30.0, 30
LINK_TIMEOUT_S = 0.1  # 3 periods: lost at the 4th tick after the unanswered request (3 periods is 99.99 ms)
TIME_OF_DAY = r"\d\d:\d\d:\d\d\.\d"


def link_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("policy link ")]


def silent_after(client: SimulatedPolicyLink, answered: int, back_at_step: int | None = None, runner=None):
    """The server answers `answered` requests, then swallows every request (until step `back_at_step`)."""
    original = client.submit

    def submit(infer):
        dead = len(client.requests) >= answered and (back_at_step is None or infer.step_index < back_at_step)
        client.replying = not dead
        original(infer)

    client.submit = submit


def runner_for(on_link_loss: str, duration_s: float = 2.0, mode: str = "vlash", **executor) -> Runner:
    executor = {"link_timeout_s": LINK_TIMEOUT_S, **executor}
    clock = SimulatedClock()
    client = SimulatedPolicyLink(ramp_planner(H), point_metadata(chunk_length=H), clock, latency_s=0.05)
    config = ExecutorConfig(mode, execution_horizon=5, initial_delay=2, adapt_delay=False,
                            on_link_loss=on_link_loss, **executor)  # fmt: skip
    return Runner(PointArm(), client, RunConfig(config, rate_hz=RATE, duration_s=duration_s), clock)


def first_unanswered_step(runner: Runner, answered: int) -> int:
    return runner.client.requests[answered].step_index


@pytest.mark.parametrize("policy", ["finish-chunk", "hold"])
def test_a_silent_server_is_a_lost_link_after_the_timeout_and_the_policy_decides_when_the_robot_holds(policy, caplog):
    runner = runner_for(policy)
    silent_after(runner.client, answered=3)
    with caplog.at_level(logging.WARNING):
        result = runner.run()
    (line,) = link_lines(caplog)  # one loss, never restored
    s, k = result.summary, first_unanswered_step(runner, 3)
    lost = k + 4  # the first tick more than 0.1 s after the unanswered request
    assert not result.held[k:lost].any()  # before the timeout the running chunk runs on either way
    assert s.link_losses == 1 and s.link_lost_steps == len(result.steps) - lost
    running = result.chunk_ids[lost - 1]
    if policy == "hold":  # stopped within one period of the loss: the last command is held from that tick on
        assert result.held[lost:].all()
        assert np.array_equal(
            result.commands[lost:], np.repeat(result.commands[lost - 1 : lost], len(result.steps) - lost, 0)
        )
        assert next(r for r in result.records if r.chunk_id == running).status == "link_lost"
        then = "holding from this tick"
    else:  # the running chunk runs out first (it started at index 0 two ticks after its request; 30 indices)
        start = next(r for r in result.records if r.chunk_id == running).switch_step
        assert lost < start + H < len(result.steps)
        assert not result.held[lost : start + H].any() and result.held[start + H :].all()
        assert (result.chunk_ids[lost : start + H] == running).all()
        then = f"running the current chunk out (up to {start + H - lost} more ticks), then holding"
    # the time of day, and the policy in force named with what the robot does under it
    expected = f"policy link lost at {TIME_OF_DAY} " + re.escape(f"(no reply for 0.1 s); on-link-loss {policy}: {then}")
    assert re.fullmatch(expected, line), line
    assert s.unexpected_holds == result.held[lost:].sum()  # holds on a lost link are not waits by design
    assert s.waiting_steps == result.held[:lost].sum() == 2  # only the first chunk's wait (50 ms: 2 ticks)


def test_replies_that_return_end_the_loss_and_a_first_chunk_starts_afresh(caplog):
    runner = runner_for("hold", duration_s=3.0, request_timeout_s=0.5)  # re-sent every 15 ticks meanwhile
    silent_after(runner.client, answered=3, back_at_step=45)
    with caplog.at_level(logging.WARNING):
        result = runner.run()
    lost, restored = link_lines(caplog)
    assert re.fullmatch(f"policy link lost at {TIME_OF_DAY} .*on-link-loss hold: holding from this tick", lost)
    silent = re.fullmatch(f"policy link restored at {TIME_OF_DAY} after (\\d+\\.\\d) s without a reply", restored)
    # silent from the first unanswered request to the reply of the first one answered again (simulated time)
    answered_again = next(r for r in runner.client.requests if r.step_index >= 45).step_index
    expected_s = (answered_again - first_unanswered_step(runner, 3)) / RATE + 0.05
    assert silent and float(silent.group(1)) == round(expected_s, 1), (restored, expected_s)
    s = result.summary
    resumed = [r for r in result.records if r.request_step >= 45 and r.switch_step is not None]
    assert s.link_losses == 1 and resumed and resumed[0].mode == "sync"  # nothing to continue from: a first chunk
    assert not result.held[-20:].any() and s.chunks > 3
    lost_from = first_unanswered_step(runner, 3) + 4
    back = resumed[0].switch_step
    assert result.held[lost_from:back].all() and s.link_lost_steps == resumed[0].request_step + 2 - lost_from


def test_a_slow_but_answering_server_is_not_a_lost_link():
    runner = runner_for("hold", mode="sync", link_timeout_s=0.5)  # sync waits 0.4 s for every chunk, by design
    runner.client.latency_s = 0.4
    result = runner.run()
    s = result.summary
    assert s.link_losses == 0 and s.unexpected_holds == 0 and s.chunks >= 3
    assert s.watchdog_holds == s.waiting_steps > len(result.steps) / 2  # mostly waiting, all by design
    assert s.unusable_reason() is None


def test_link_watch_counts_from_the_first_unanswered_request_and_any_message_resets_it():
    watch = LinkWatch(0.1)
    assert not watch.update(10**12)  # nothing owed: silence is no loss
    watch.requested(0)
    watch.requested(50_000_000)  # a second request does not restart the count
    assert not watch.update(100_000_000) and watch.update(100_000_001) and watch.lost and watch.losses == 1
    assert not watch.update(200_000_000) and watch.losses == 1  # still the same loss
    watch.heard(210_000_000, still_owed=True)  # a partial reply: alive, more owed
    assert not watch.update(300_000_000) and not watch.lost
    watch.heard(305_000_000, still_owed=False)
    assert not watch.update(10**12) and watch.silent_s(10**12) == 0.0


def test_link_settings_are_validated():
    with pytest.raises(ValueError, match="on_link_loss must be one of"):
        ExecutorConfig(on_link_loss="stop")
    with pytest.raises(ValueError, match="link_timeout_s must be > 0"):
        ExecutorConfig(link_timeout_s=0.0)


def test_a_chunk_that_ran_out_before_the_loss_is_not_announced_as_still_running(caplog):
    runner = runner_for("finish-chunk", duration_s=4.0, link_timeout_s=1.5)  # longer than a chunk (30 ticks: 1 s)
    silent_after(runner.client, answered=3)
    with caplog.at_level(logging.WARNING):
        result = runner.run()
    (line,) = link_lines(caplog)
    assert line.endswith("(no reply for 1.5 s); on-link-loss finish-chunk: no chunk left to run: holding"), line
    assert result.summary.link_losses == 1 and result.summary.missed_deadlines > 0  # it starved before the loss
