"""Per-token times, noisy actions and the masked loss."""

from __future__ import annotations

import torch

from vlash.train.flow import draw_times, flow_loss, noisy_actions, token_times

H, A = 50, 32


def _times(seed: int = 0, batch: int = 64):
    g = torch.Generator().manual_seed(seed)
    t = draw_times(batch, g)
    prefix = torch.randint(0, 9, (batch,), generator=g)
    use_has = torch.arange(batch) % 2 == 0
    return t, prefix, use_has, token_times(t, prefix, use_has, H)


def test_times_follow_beta_1_5_1():
    t = draw_times(20000, torch.Generator().manual_seed(0))
    assert t.min() >= 0.001 and t.max() <= 1.0
    assert abs(t.mean().item() - (1.5 / 2.5 * 0.999 + 0.001)) < 0.01


def test_prefix_tokens_are_clean():
    t, prefix, use_has, tau = _times()
    actions, noise = torch.randn(len(t), H, A), torch.randn(len(t), H, A)
    x_t, u = noisy_actions(actions, noise, tau)
    for b in range(len(t)):
        d = int(prefix[b])
        assert (tau[b, :d] == 0).all()
        assert torch.equal(x_t[b, :d], actions[b, :d])
    torch.testing.assert_close(u, noise - actions)


def test_horizon_aware_rows_are_non_decreasing_and_constant_rows_equal_t():
    t, prefix, use_has, tau = _times()
    for b in range(len(t)):
        d = int(prefix[b])
        if use_has[b]:
            assert (tau[b, 1:] >= tau[b, :-1]).all()
            assert tau[b, -1] == torch.tensor(t[b].item())  # the last index follows the constant schedule
        else:
            assert (tau[b, d:] == t[b]).all()


def test_loss_counts_only_masked_noisy_real_dims():
    v, u = torch.zeros(2, H, A), torch.zeros(2, H, A)
    tau = torch.full((2, H), 0.5)
    tau[0, 5] = 0.0  # a final token: not counted
    mask = torch.ones(2, H, dtype=torch.bool)
    mask[1, :10] = False
    u[1, :10] = 100.0  # masked out
    u[0, 5] = 100.0  # tau = 0
    u[:, :, 2:] = 7.0  # padded dims: weight 0 here
    loss, real = flow_loss(v, u, mask, tau, real_dims=2, pad_weight=0.0)
    assert loss.item() == 0.0 and real.item() == 0.0
    u[0, 20, :2] = 1.0  # one counted token with error 1 on both real dims
    loss, real = flow_loss(v, u, mask, tau, real_dims=2, pad_weight=0.5)
    tokens = 2 * H - 10 - 1
    torch.testing.assert_close(real, torch.tensor(1.0 / tokens))
    torch.testing.assert_close(loss, real + 0.5 * 49.0)
