"""Toy differentiable velocity fields for the sampler tests (t = 1 noise, v ≈ eps - a)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch import Tensor


class GaussianField:
    """Exact velocity of a per-token Gaussian flow: a_i ~ N(mu_i, s^2 I), tokens independent.

    x_t = t eps + (1 - t) a, so E[eps - a | x_t] is linear in x_t with a per-token time.
    """

    def __init__(self, mu: Tensor, s: float = 0.3) -> None:
        self.mu, self.s2 = mu, s * s

    def __call__(self, x: Tensor, tau: Tensor) -> Tensor:
        t = tau[..., None]
        var = t * t + (1 - t) ** 2 * self.s2
        return (t - (1 - t) * self.s2) / var * (x - (1 - t) * self.mu) - self.mu


class BimodalField:
    """Exact velocity of a two-mode chunk distribution: a = ±m + N(0, s^2 I), modes equally likely.

    The mode is shared by the whole chunk, so the endpoint depends on the noise.
    """

    def __init__(self, m: Tensor, s: float = 0.2) -> None:
        self.modes = [m, -m]
        self.gauss = [GaussianField(mode, s) for mode in self.modes]
        self.s2 = s * s

    def __call__(self, x: Tensor, tau: Tensor) -> Tensor:
        t = tau[..., None]
        var = t * t + (1 - t) ** 2 * self.s2
        logps = [(-0.5 * (x - (1 - t) * mode) ** 2 / var - 0.5 * torch.log(var)).sum(dim=(1, 2)) for mode in self.modes]
        post = torch.softmax(torch.stack(logps, dim=0), dim=0)  # [2, B]
        return sum(p[:, None, None] * g(x, tau) for p, g in zip(post, self.gauss, strict=True))


class MixingField:
    """A fixed random field where tokens interact and per-token time matters; differentiable."""

    def __init__(self, horizon: int, dim: int, seed: int = 0) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.target = torch.randn(horizon, dim, generator=gen)
        self.w_act = torch.randn(dim, dim, generator=gen) / math.sqrt(dim)
        self.w_tok = torch.randn(horizon, horizon, generator=gen) / math.sqrt(horizon)
        self.w_tau = torch.randn(dim, generator=gen)

    def __call__(self, x: Tensor, tau: Tensor) -> Tensor:
        t = tau[..., None]
        mix = torch.einsum("ij,bja->bia", self.w_tok, torch.tanh(x @ self.w_act))
        return x - self.target + 0.3 * mix * (1 + t) + 0.2 * torch.sin(3 * t) * self.w_tau


class Recorder:
    """Wraps a velocity field and records every (x, tau) it is called with."""

    def __init__(self, field) -> None:
        self.field, self.xs, self.taus = field, [], []

    def __call__(self, x: Tensor, tau: Tensor) -> Tensor:
        self.xs.append(x.detach().clone())
        self.taus.append(tau.detach().clone())
        return self.field(x, tau)


H, A, B = 16, 3, 4


@pytest.fixture
def mixing_field() -> MixingField:
    return MixingField(H, A)


@pytest.fixture
def gaussian_field() -> GaussianField:
    return GaussianField(torch.randn(H, A, generator=torch.Generator().manual_seed(1)))


@pytest.fixture
def noise() -> Tensor:
    return torch.randn(B, H, A, generator=torch.Generator().manual_seed(2))


@pytest.fixture
def prefix() -> Tensor:
    return torch.randn(B, 4, A, generator=torch.Generator().manual_seed(3)) * 0.7 + 0.1234567


@pytest.fixture
def toy() -> SimpleNamespace:
    """The toy field classes, for tests that build their own."""
    return SimpleNamespace(Gaussian=GaussianField, Bimodal=BimodalField, Mixing=MixingField, Recorder=Recorder)
