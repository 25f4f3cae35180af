"""The shared-time path: the plan marks the steps at which every row's tokens share one time, and a stepper run with
`shared_time` passes tau [n, 1] there (the model then conditions once per row), with the same result."""

from __future__ import annotations

import pytest
import torch

from tests.sampling.conftest import BimodalField
from vlash.sampling import BatchStepper, FlowSampler, SamplerConfig, stack_plans

H, A, N = 16, 3, 6


def _noise(seed: int) -> torch.Tensor:
    return torch.randn(1, H, A, generator=torch.Generator().manual_seed(seed))


def _plan(schedule: str = "constant", prefix_len: int = 0, seed: int = 0):
    noise = _noise(seed)
    prefix = noise[:, :prefix_len] * 0.5 if prefix_len else None
    return FlowSampler(SamplerConfig(num_steps=N, schedule=schedule)).plan(noise, prefix)


def test_the_plan_marks_the_steps_whose_tokens_share_one_time():
    assert _plan().shared_time == [True] * N
    # a committed prefix sits at tau = 0 while the other tokens move
    assert _plan(prefix_len=4).shared_time == [False] * N
    # horizon-aware: every token starts at t = 1, then they move at different rates
    assert _plan("horizon-aware").shared_time == [True] + [False] * (N - 1)
    # stacked: a step is shared only when it is for every row
    assert stack_plans([_plan(), _plan(seed=1)]).shared_time == [True] * N
    assert stack_plans([_plan(), _plan("horizon-aware", seed=1)]).shared_time == [True] + [False] * (N - 1)


def _run(plan, shared_time: bool):
    field = BimodalField(torch.linspace(-1, 1, H * A).reshape(H, A))
    shapes = []

    def velocity(x, tau):
        shapes.append(tuple(tau.shape))
        return field(x, tau.expand(x.shape[:2]) if tau.shape[1] == 1 else tau)

    stepper = BatchStepper(plan, shared_time=shared_time)
    done = [event for event in stepper.run(velocity) if event.done]
    return done, shapes


@pytest.mark.parametrize("schedule", ["constant", "horizon-aware"])
def test_shared_time_passes_one_time_per_row_and_changes_nothing(schedule):
    plan = stack_plans([_plan(schedule), _plan(schedule, seed=1)])
    want, per_token = _run(plan, shared_time=False)
    got, shapes = _run(plan, shared_time=True)
    assert per_token == [(2, H)] * N
    assert shapes == ([(2, 1)] * N if schedule == "constant" else [(2, 1)] + [(2, H)] * (N - 1))
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a.result.actions, b.result.actions)


def test_the_sampler_passes_shared_time_through():
    noise, shapes = _noise(3), []

    def velocity(x, tau):
        shapes.append(tau.shape[1])
        return x * tau[..., None]

    sampler = FlowSampler(SamplerConfig(num_steps=N))
    sampler.sample(velocity, noise)
    sampler.sample(velocity, noise, shared_time=True)
    assert shapes == [H] * N + [1] * N
