"""BatchStepper over stacked per-row plans: each row follows its own schedule, prefix, guidance and early stop and
ends where FlowSampler ends it alone (toy velocity fields of tests/sampling)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tests.sampling.conftest import BimodalField, MixingField
from vlash.errors import ShapeError
from vlash.sampling import (
    BatchStepper,
    Cancelled,
    FlowSampler,
    GuidanceConfig,
    SamplerConfig,
    guided_velocity,
    stack_plans,
)

H, A, N = 16, 3, 6
GUIDED = SamplerConfig(num_steps=N, guidance=GuidanceConfig(execution_horizon=5))


def _noise(seed: int, batch: int = 1) -> torch.Tensor:
    return torch.randn(batch, H, A, generator=torch.Generator().manual_seed(seed))


def _rows() -> list[tuple[FlowSampler, dict]]:
    """Constant; horizon-aware with a prefix of 4; horizon-aware with an early stop; guided RTC with delay 2."""
    prefix = _noise(10)[:, :4] * 0.7 + 0.1234567
    return [
        (FlowSampler(SamplerConfig(num_steps=N)), {"noise": _noise(0)}),
        (FlowSampler(SamplerConfig(num_steps=N, schedule="horizon-aware")), {"noise": _noise(1), "prefix": prefix}),
        (FlowSampler(SamplerConfig(num_steps=N, schedule="horizon-aware", early_stop_final=7)), {"noise": _noise(2)}),
        (FlowSampler(GUIDED), {"noise": _noise(3), "guidance_target": _noise(4) * 0.5, "guidance_delay": 2}),
    ]


def _run(stepper: BatchStepper, field, drop_at: dict[int, int] | None = None):
    """Step to the end; returns the finals per row [(start, stop, step, actions)], results per row, and the batch
    size of every velocity call. drop_at: {row: step} drops the row before that step."""
    finals, results, sizes = {}, {}, []

    def velocity(x, tau):
        sizes.append(x.shape[0])
        return field(x, tau)

    while not stepper.done:
        stepper.drop([row for row, k in (drop_at or {}).items() if k == stepper.step_index])
        if stepper.done:
            break
        for event in stepper.step(velocity):
            if event.done:
                results[event.row] = event.result
            else:
                finals.setdefault(event.row, []).append((event.start, event.stop, event.step, event.actions))
    return finals, results, sizes


@pytest.mark.parametrize("shrink", [True, False])
def test_stacked_rows_end_where_each_ends_alone(shrink):
    field = MixingField(H, A)
    rows = _rows()
    alone = []
    for sampler, kw in rows:
        run = sampler.start(field, **kw)
        chunks = [event for event in run if not event.done]
        alone.append(([(c.start, c.stop, c.step, c.actions) for c in chunks], run.result))
    plan = stack_plans([sampler.plan(**kw) for sampler, kw in rows])
    assert plan.batch == 4 and plan.prefix_lens == [0, 4, 0, 0] and plan.guided == [False, False, False, True]
    finals, results, sizes = _run(BatchStepper(plan, shrink=shrink), field)
    for row, (chunks, want) in enumerate(alone):
        got = results[row]
        assert [c[:3] for c in finals[row]] == [c[:3] for c in chunks]
        for (*_, a), (*_, b) in zip(finals[row], chunks, strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
        assert (got.steps_run, got.prefix_len) == (want.steps_run, want.prefix_len)
        assert torch.equal(got.final_at_step, want.final_at_step)
        torch.testing.assert_close(got.actions, want.actions, atol=1e-6, rtol=0)
    assert torch.equal(results[1].actions[0, :4], rows[1][1]["prefix"][0])  # the prefix, bit-exact
    assert results[2].steps_run < N  # the early stop
    assert sizes == ([4] * results[2].steps_run + [3] * (N - results[2].steps_run) if shrink else [4] * N)


def test_rows_with_different_prefix_lengths_end_where_each_ends_alone():
    field = MixingField(H, A)
    prefix = _noise(11)[:, :5] * 0.3 - 0.7654321
    aware = SamplerConfig(num_steps=N, schedule="horizon-aware")
    rows = [
        (FlowSampler(aware), {"noise": _noise(5), "prefix": prefix[:, :2]}),
        (FlowSampler(replace(aware, early_stop_final=9)), {"noise": _noise(6), "prefix": prefix}),
        (FlowSampler(SamplerConfig(num_steps=N)), {"noise": _noise(7)}),
    ]
    alone = [sampler.sample(field, **kw) for sampler, kw in rows]
    plan = stack_plans([sampler.plan(**kw) for sampler, kw in rows])
    assert plan.prefix_lens == [2, 5, 0]
    finals, results, _ = _run(BatchStepper(plan), field)
    for row, want in enumerate(alone):
        assert (results[row].steps_run, results[row].prefix_len) == (want.steps_run, want.prefix_len)
        assert torch.equal(results[row].final_at_step, want.final_at_step)
        torch.testing.assert_close(results[row].actions, want.actions, atol=1e-6, rtol=0)
        assert finals[row][0][0] == want.prefix_len  # the first final action follows the row's own prefix
    for row, d in ((0, 2), (1, 5)):
        assert torch.equal(results[row].actions[0, :d], prefix[0, :d])  # bit-exact, whatever the other rows hold
    assert results[1].steps_run < N == results[0].steps_run  # the prefix-5 row stops early, the prefix-2 row goes on


def test_a_dropped_row_leaves_and_the_others_go_on():
    field = MixingField(H, A)
    rows = _rows()
    plan = stack_plans([sampler.plan(**kw) for sampler, kw in rows])
    full_finals, full, _ = _run(BatchStepper(plan), field)
    finals, results, sizes = _run(BatchStepper(plan), field, drop_at={3: 1, 0: 3})
    stop = full[2].steps_run  # the early-stopped row leaves after this many steps
    assert set(results) == {1, 2} and 3 < stop < N
    assert sizes == [4, 3, 3] + [2] * (stop - 3) + [1] * (N - stop)
    assert 0 not in finals and 3 not in finals  # a dropped row reports nothing more
    for row in (1, 2):
        torch.testing.assert_close(results[row].actions, full[row].actions, atol=1e-6, rtol=0)
        assert [f[:3] for f in finals[row]] == [f[:3] for f in full_finals[row]]


def test_run_ends_a_cancelled_row_with_one_done_event_and_the_others_go_on():
    field = MixingField(H, A)
    plan = stack_plans([sampler.plan(**kw) for sampler, kw in _rows()])
    full_finals, full, _ = _run(BatchStepper(plan), field)
    stepper = BatchStepper(plan)
    events = list(stepper.run(field, cancelled=lambda row: row == 3 and stepper.step_index >= 2))
    (gone,) = [e for e in events if e.row == 3 and e.done]
    assert isinstance(gone.result, Cancelled)  # left before step 2: nothing of it after that
    assert events.index(gone) == max(i for i, e in enumerate(events) if e.row == 3)
    assert max(e.step for e in events if e.row == 3) <= 1
    for row in (0, 1, 2):
        (done,) = [e for e in events if e.row == row and e.done]
        torch.testing.assert_close(done.result.actions, full[row].actions, atol=1e-6, rtol=0)
        finals = [(e.start, e.stop, e.step) for e in events if e.row == row and not e.done]
        assert finals == [f[:3] for f in full_finals[row]]


def test_guided_velocity_per_row_leaves_weight_zero_rows_unchanged():
    field = BimodalField(torch.ones(H, A))
    x, target = _noise(0, 3), _noise(1, 3)
    tau = torch.rand(3, H, generator=torch.Generator().manual_seed(2))
    mask = torch.rand(H, generator=torch.Generator().manual_seed(3))
    masks = torch.stack([mask, torch.zeros(H), mask * 0.5])
    got = guided_velocity(field, x, tau, target, masks, torch.tensor([2.0, 0.0, 3.0]))
    assert torch.equal(got[1], field(x, tau)[1])  # the bimodal field couples tokens: a per-row VJP is not trivial
    for row, (m, w) in enumerate([(mask, 2.0), (mask * 0.5, 3.0)]):
        one = guided_velocity(field, x[[row * 2]], tau[[row * 2]], target[[row * 2]], m, w)
        torch.testing.assert_close(got[[row * 2]], one, atol=1e-6, rtol=0)
    assert not torch.allclose(got[0], field(x, tau)[0], atol=1e-3)


def test_plans_that_cannot_share_a_batch_are_refused():
    a = FlowSampler(SamplerConfig(num_steps=N)).plan(_noise(0))
    b = FlowSampler(SamplerConfig(num_steps=N + 1)).plan(_noise(0))
    with pytest.raises(ShapeError, match="num_steps"):
        stack_plans([a, b])
    with pytest.raises(ValueError, match="at least one"):
        stack_plans([])
    stepper = BatchStepper(a)
    stepper.drop([0])
    with pytest.raises(RuntimeError, match="no row"):
        stepper.step(MixingField(H, A))
