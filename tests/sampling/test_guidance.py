import math

import pytest
import torch

from vlash.sampling import (
    FlowSampler,
    GuidanceConfig,
    SamplerConfig,
    guidance_weight,
    guided_velocity,
    rtc_soft_mask,
)
from vlash.sampling.plan import stack_plans

H, A, B, D, S = 16, 2, 64, 3, 6


def test_rtc_soft_mask_values():
    w = rtc_soft_mask(H, D, S)
    assert w.shape == (H,) and w.dtype == torch.float32
    assert torch.all(w[:D] == 1)
    assert torch.all(w[H - S :] == 0)
    mid = w[D : H - S]
    assert torch.all(mid > 0) and torch.all(mid < 1)
    assert torch.all(mid[1:] < mid[:-1])
    c = (H - S - D) / (H - S - D + 1)
    assert w[D].item() == pytest.approx(c * math.expm1(c) / (math.e - 1), rel=1e-6)


def test_rtc_soft_mask_edges_and_validation():
    assert torch.all(rtc_soft_mask(8, 0, 0) > 0)  # no prefix, nothing executed: all weighted
    assert torch.all(rtc_soft_mask(8, 4, 4)[:4] == 1) and torch.all(rtc_soft_mask(8, 4, 4)[4:] == 0)
    for bad in [(0, 0, 0), (8, -1, 2), (8, 2, -1), (8, 5, 4)]:
        with pytest.raises(ValueError):
            rtc_soft_mask(*bad)


def test_guidance_weight():
    assert guidance_weight(1.0, 5.0) == 5.0  # r = 0 at the first step: clipped to beta
    assert guidance_weight(0.0, 5.0) == 5.0
    r = 0.5  # r2 = 0.5 -> (1 - r) / (r * r2) = 2
    assert guidance_weight(1 - r, 5.0) == pytest.approx(2.0)
    assert guidance_weight(1 - r, 1.5) == 1.5


def test_guided_velocity_closed_form():
    """For v = x - c: a1_hat = (1 - tau) x + tau c. LeRobot's form (the default) holds v constant, so g = err; the
    paper's (vjp) differentiates through v: J = (1 - tau) I, so g = (1 - tau) * err."""
    gen = torch.Generator().manual_seed(0)
    c, x, y = (torch.randn(2, 5, 3, generator=gen) for _ in range(3))
    tau = torch.rand(2, 5, generator=gen)
    mask = torch.rand(5, generator=gen)
    a1_hat = (1 - tau[..., None]) * x + tau[..., None] * c
    err = (y - a1_hat) * mask[None, :, None]
    held = guided_velocity(lambda x_, t_: x_ - c, x, tau, y, mask, 2.5)
    assert torch.allclose(held, (x - c) - 2.5 * err, atol=1e-6)
    through = guided_velocity(lambda x_, t_: x_ - c, x, tau, y, mask, 2.5, vjp=True)
    assert torch.allclose(through, (x - c) - 2.5 * (1 - tau[..., None]) * err, atol=1e-6)
    assert not held.requires_grad and not through.requires_grad


def test_lerobots_form_needs_no_autograd():
    """A velocity that cannot be differentiated (an exported engine's) runs guided with v held constant."""
    c = torch.randn(1, 4, 2)
    x, y = torch.randn(1, 4, 2), torch.randn(1, 4, 2)

    def frozen(x_, t_):
        assert not torch.is_grad_enabled() and not x_.requires_grad
        return x_ - c

    guided_velocity(frozen, x, torch.full((1, 4), 0.5), y, torch.ones(4), 1.0)
    with pytest.raises(AssertionError):
        guided_velocity(frozen, x, torch.full((1, 4), 0.5), y, torch.ones(4), 1.0, vjp=True)


@pytest.fixture
def bimodal(toy):
    m = torch.ones(H, A) * torch.linspace(0.5, 1.5, H)[:, None]
    return toy.Bimodal(m, 0.2), m


def weighted_distance(actions, target):
    return (((actions - target) ** 2).sum(-1) * rtc_soft_mask(H, D, S)).sum(-1)


def test_guided_rtc_pulls_toward_previous_chunk(bimodal):
    field, m = bimodal
    noise = torch.randn(B, H, A, generator=torch.Generator().manual_seed(0))
    target = (m + 0.1 * torch.randn(H, A, generator=torch.Generator().manual_seed(5))).expand(B, H, A)
    unguided = FlowSampler(SamplerConfig()).sample(field, noise).actions
    cfg = SamplerConfig(guidance=GuidanceConfig(execution_horizon=S, max_weight=5.0))
    guided = FlowSampler(cfg).sample(field, noise, guidance_target=target, guidance_delay=D).actions
    before, after = weighted_distance(unguided, target), weighted_distance(guided, target)
    assert (unguided[:, :, 0].mean(1) < 0).sum() > B // 4  # without guidance many take the other mode
    assert after.mean() < 0.2 * before.mean()
    assert torch.all(after <= before + 1e-3)
    assert guided.dtype == torch.float32


def test_guidance_with_prefix_clamp(bimodal):
    field, m = bimodal
    noise = torch.randn(8, H, A, generator=torch.Generator().manual_seed(1))
    target = m.expand(8, H, A)
    cfg = SamplerConfig(guidance=GuidanceConfig(execution_horizon=S))
    result = FlowSampler(cfg).sample(field, noise, prefix=target[:, :D], guidance_target=target)
    assert torch.equal(result.actions[:, :D], target[:, :D])
    with pytest.raises(ValueError, match="guidance_delay"):
        FlowSampler(cfg).start(field, noise, prefix=target[:, :D], guidance_target=target, guidance_delay=2)


def test_guidance_config_without_target_runs_unguided(bimodal):
    field, _ = bimodal
    noise = torch.randn(4, H, A, generator=torch.Generator().manual_seed(2))
    cfg = SamplerConfig(guidance=GuidanceConfig(execution_horizon=S))
    assert torch.equal(FlowSampler(cfg).sample(field, noise).actions, FlowSampler().sample(field, noise).actions)


def test_guidance_validation(bimodal):
    field, m = bimodal
    noise = torch.zeros(2, H, A)
    with pytest.raises(ValueError, match="constant"):
        SamplerConfig(schedule="horizon-aware", guidance=GuidanceConfig(execution_horizon=S))
    with pytest.raises(ValueError, match="guidance"):
        FlowSampler().start(field, noise, guidance_target=noise)
    with pytest.raises(ValueError, match="guidance_delay"):
        FlowSampler().start(field, noise, guidance_delay=2)
    cfg = SamplerConfig(guidance=GuidanceConfig(execution_horizon=S))
    with pytest.raises(ValueError, match="guidance_target"):
        FlowSampler(cfg).start(field, noise, guidance_target=noise[:, :-1])
    with pytest.raises(ValueError, match="execution_horizon"):
        GuidanceConfig(execution_horizon=0)
    with pytest.raises(ValueError, match="max_weight"):
        GuidanceConfig(execution_horizon=S, max_weight=0.0)
    with pytest.raises(ValueError, match="vjp"):
        GuidanceConfig(execution_horizon=S, vjp=1)


def test_the_plan_carries_vjp_and_stacks_only_one_kind(bimodal):
    field, m = bimodal
    noise = torch.randn(2, H, A, generator=torch.Generator().manual_seed(3))
    target = m.expand(2, H, A)

    def plan(vjp: bool):
        cfg = SamplerConfig(guidance=GuidanceConfig(execution_horizon=S, vjp=vjp))
        return FlowSampler(cfg).plan(noise, guidance_target=target, guidance_delay=D)

    assert plan(True).guidance_vjp and not plan(False).guidance_vjp
    assert stack_plans([plan(True), FlowSampler().plan(noise)]).guidance_vjp
    with pytest.raises(ValueError, match="vjp"):
        stack_plans([plan(True), plan(False)])
    through = FlowSampler(SamplerConfig(guidance=GuidanceConfig(execution_horizon=S, vjp=True)))
    held = FlowSampler(SamplerConfig(guidance=GuidanceConfig(execution_horizon=S)))
    a = through.sample(field, noise, guidance_target=target, guidance_delay=D).actions
    b = held.sample(field, noise, guidance_target=target, guidance_delay=D).actions
    assert (a - b).abs().max() > 1e-3  # the stepper follows the plan's vjp
