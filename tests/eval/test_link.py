"""The simulated link's timing (vlash.eval.link): which rows arrive when, how many the final message carries, and the
oracle's finality against what the real flow sampler reports."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robot_io.protocol import Infer
from vlash.errors import ConfigError
from vlash.eval.link import NOT_FINAL_ROW, PREFIX_ROW, LinkTiming, PlanResult, oracle_result
from vlash.sampling import FlowSampler, SamplerConfig

H = 50


def _pieces(planned) -> list[tuple[float, int]]:
    """The partial messages as (fraction rounded to 1e-9, stop): fractions are sums of floats."""
    return [(round(fraction, 9), stop) for fraction, stop in planned.pieces]


def _planned(final_at_step, steps_run: int, timing: LinkTiming | None = None):
    result = PlanResult(np.zeros((len(final_at_step), 1), np.float32), np.asarray(final_at_step), steps_run)
    return (timing or LinkTiming(4)).planned(result)


def test_a_constant_chunk_arrives_whole_after_d():
    planned = _planned([9] * H, 10)
    assert planned.pieces == () and planned.rows == H and planned.final_fraction == 1.0


def test_a_constant_chunk_with_a_prefix_brings_no_new_row_before_the_final_message():
    planned = _planned([PREFIX_ROW] * 3 + [9] * (H - 3), 10)
    assert all(stop <= 3 for _, stop in planned.pieces)  # nothing past the prefix streams early
    assert planned.rows == H and planned.final_fraction == 1.0


def test_horizon_aware_rows_stream_as_their_denoise_step_ends():
    timing = LinkTiming(4, prefill_share=0.2, num_steps=4)
    final = [0, 1, 1, 2, 2, 2, 3, 3]
    planned = _planned(final, 4, timing)
    # after step k (fraction p + (1 - p)(k + 1) / N of d) the leading rows final by then
    assert _pieces(planned) == [(0.4, 1), (0.6, 3), (0.8, 6)]
    assert planned.rows == 8 and planned.final_fraction == 1.0


def test_a_prefix_counts_among_the_first_rows():
    planned = _planned([PREFIX_ROW, PREFIX_ROW, 0, 1, 1, 2], 3, LinkTiming(4, prefill_share=0.0, num_steps=3))
    assert _pieces(planned) == [(round(1 / 3, 9), 3), (round(2 / 3, 9), 5)]
    assert planned.rows == 6 and planned.final_fraction == 1.0


def test_an_early_stop_ends_the_final_message_at_the_last_final_row_and_sooner():
    timing = LinkTiming(10, prefill_share=0.15, num_steps=10)
    final = [PREFIX_ROW, 0, 1, 1, 2] + [NOT_FINAL_ROW] * 5
    planned = _planned(final, 3, timing)
    assert planned.rows == 5 and planned.final_fraction == pytest.approx(0.15 + 0.85 * 3 / 10)
    assert _pieces(planned) == [(0.235, 2), (0.32, 4)]


def test_link_timing_refuses_bad_settings():
    with pytest.raises(ConfigError, match="delay must be an int >= 0"):
        LinkTiming(-1)
    with pytest.raises(ConfigError, match="prefill_share"):
        LinkTiming(2, prefill_share=1.0)
    with pytest.raises(ConfigError, match="num_steps"):
        LinkTiming(2, num_steps=0)


def _infer(**fields) -> Infer:
    return Infer(request_id=1, step_index=0, capture_time_ns=0, prompt="", images={},
                 state=np.zeros(2, np.float32), **fields)  # fmt: skip


@pytest.mark.parametrize(
    ("schedule", "prefix_len", "s"),
    [("constant", 0, 10), ("constant", 3, 10), ("horizon-aware", 0, None), ("horizon-aware", 2, 10),
     ("horizon-aware", 0, 1), ("horizon-aware", 4, 3), ("horizon-aware", 40, 20)],
)  # fmt: skip
def test_oracle_finality_is_what_the_flow_sampler_reports(schedule, prefix_len, s):
    """The sampler run on a real (nonzero, state-dependent) velocity and the server's early stop rule."""
    prefix = np.ones((prefix_len, 2), np.float32) if prefix_len else None
    infer = _infer(schedule=schedule, prefix=prefix, execution_horizon=s)
    oracle = oracle_result(np.zeros((H, 2), np.float32), infer, num_steps=10)
    stop = min(H, prefix_len + s) if schedule == "horizon-aware" and s is not None else None
    sampler = FlowSampler(SamplerConfig(num_steps=10, schedule=schedule, early_stop_final=stop))
    gen = torch.Generator().manual_seed(0)
    result = sampler.sample(lambda x, tau: torch.sin(3 * x) - tau[..., None], torch.randn(1, H, 2, generator=gen),
                            prefix=None if prefix is None else torch.from_numpy(prefix)[None])  # fmt: skip
    np.testing.assert_array_equal(oracle.final_at_step, result.final_at_step.numpy())
    assert oracle.steps_run == result.steps_run
    assert (oracle.final_at_step[:prefix_len] == PREFIX_ROW).all()


def test_the_oracle_stops_early_only_for_horizon_aware_requests_that_say_s():
    def rows(**fields) -> int:
        final = oracle_result(np.zeros((H, 2), np.float32), _infer(**fields), num_steps=10).final_at_step
        return int((final != NOT_FINAL_ROW).sum())

    two = np.zeros((2, 2), np.float32)
    assert rows(schedule="horizon-aware", prefix=two, execution_horizon=10) == 15  # >= 2 + 10: step 4 ends at row 15
    assert rows(schedule="horizon-aware", prefix=np.zeros((45, 2), np.float32), execution_horizon=10) == H
    assert rows(schedule="horizon-aware", prefix=two) == H  # no s: the whole chunk
    assert rows(schedule="constant", prefix=two, execution_horizon=10) == H


def test_the_oracle_result_defaults_to_the_constant_schedule():
    oracle = oracle_result(np.zeros((H, 2), np.float32), _infer(execution_horizon=10), num_steps=4)
    assert (oracle.final_at_step == 3).all() and oracle.steps_run == 4
