"""Does the policy look at its images? The flow loss with the right images vs with another sample's images.

A policy that solves a visual task must do worse when each sample gets the image of a different
sample (rolled by one within a fixed probe batch, same prompts, states, times and noise). The gap,
`image_gain = loss(shuffled images) - loss(right images)` on the real action dims, is ~0 for a policy
that ignores vision, however low its loss. The training loss alone cannot tell: on `reach` a policy
that samples a plausible direction per chunk reaches a low loss without ever finding the named target.

The probe batch and its randomness come from their own seeds, so measuring never changes training.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from vlash.policies.pi05.model import Pi05Model
from vlash.train.data import TrainBatch, TrainingData
from vlash.train.flow import draw_times, flow_loss, noisy_actions, token_times

PROBE_SEED_OFFSET = 7919  # the probe batch's seed is the training seed plus this (a separate stream)


@dataclass(frozen=True)
class VisionProbe:
    """A fixed batch with fixed times and noise, drawn once before training."""

    batch: TrainBatch
    tau: torch.Tensor  # [B, H] per-token times
    noise: torch.Tensor  # [B, H, A]
    real_dims: int

    @classmethod
    def draw(cls, data: TrainingData, size: int, seed: int, has_alpha: float, u0: float) -> VisionProbe:
        if size < 2:
            raise ValueError(f"a vision probe needs >= 2 samples to swap images between, got {size}")
        rng = np.random.default_rng(seed + PROBE_SEED_OFFSET)
        generator = torch.Generator().manual_seed(seed + PROBE_SEED_OFFSET)
        batch = data.batch(size, rng)
        horizon = batch.actions.shape[1]
        t = draw_times(size, generator)
        tau = token_times(t, batch.prefix_len, batch.use_has, horizon, alpha=has_alpha, u0=u0)
        noise = torch.randn(batch.actions.shape, generator=generator)
        return cls(batch, tau, noise, data.action_dims)

    @torch.no_grad()
    def measure(self, model: Pi05Model) -> dict[str, float]:
        """{"loss": with the right images, "loss_shuffled": with images rolled by one, "image_gain": the gap}."""
        batch = self.batch
        x_t, u = noisy_actions(batch.actions, self.noise, self.tau)
        rolled = torch.roll(torch.arange(len(batch.actions)), 1)
        losses = []
        for images in (batch.inputs.images, batch.inputs.images[rolled]):
            inputs = dataclasses.replace(batch.inputs, images=images)
            v = model.forward_joint(inputs, x_t, self.tau)
            losses.append(flow_loss(v, u, batch.loss_mask, self.tau, self.real_dims, 0.0)[1].item())
        return {"loss": losses[0], "loss_shuffled": losses[1], "image_gain": losses[1] - losses[0]}
