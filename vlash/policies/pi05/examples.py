"""Synthetic model inputs of the right shapes (benchmarks, warm-up, tests)."""

from __future__ import annotations

import torch

from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.model import Pi05Inputs


def random_inputs(
    config: Pi05Config,
    batch: int = 1,
    seed: int = 0,
    valid_tokens: tuple[int, ...] = (),
    masked_camera: tuple[int, int] | None = None,
    device: str | torch.device = "cpu",
) -> Pi05Inputs:
    """Random images in [-1, 1] and token ids. `valid_tokens[b]` = prompt length of row b (the rest is
    padding with id 0, as openpi pads); `masked_camera` = (row, camera) to mark absent."""
    gen = torch.Generator().manual_seed(seed)
    size, cams, length = config.vision.image_size, config.num_cameras, config.max_token_len
    tokens = torch.randint(1, config.vocab_size, (batch, length), generator=gen)
    token_masks = torch.ones(batch, length, dtype=torch.bool)
    for row, count in enumerate(valid_tokens):
        token_masks[row, count:] = False
        tokens[row, count:] = 0
    image_masks = torch.ones(batch, cams, dtype=torch.bool)
    if masked_camera is not None:
        image_masks[masked_camera] = False
    images = torch.rand(batch, cams, 3, size, size, generator=gen) * 2 - 1
    return Pi05Inputs(
        images=images.to(device),
        image_masks=image_masks.to(device),
        tokens=tokens.to(device),
        token_masks=token_masks.to(device),
    )
