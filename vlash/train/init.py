"""Initialisation for training from scratch: embedding scales, image positions, state-bin tokens.

`init_from_scratch` applies the conventions the pretrained checkpoints were trained from, which
PyTorch's defaults (N(0, 1) for every nn.Embedding) miss:
- token embeddings N(0, 1/width): Gemma multiplies them by sqrt(width), so each entry starts at unit
  scale like the other residual-stream inputs (with N(0, 1) a text token starts sqrt(width) = 14x
  larger than an image token and the layers' updates barely move it);
- SigLIP position embeddings from a 2-D sin/cos code of the patch's row and column (MAE-style, then
  trainable), so neighbouring patches start with neighbouring codes and image positions are linearly
  decodable from the first step (random N(0, 1) rows carry no geometry);
- state-bin token embeddings from a code of their value (below).

pi0.5 reads the robot state only as prompt tokens, one of 256 bins per joint. With random embeddings the
model must learn 256 unrelated vectors before it knows where the arm is — and with absolute joint
targets every action depends on that. pi0.5 itself starts from Gemma, whose number tokens already carry
structure; from scratch we give each bin token a smooth code of its value instead: a sin/cos code of the
bin centre in [-1, 1] at geometrically spaced frequencies (neighbouring bins get nearby vectors, the
value is linearly decodable), with the per-entry scale of the random rows. The rows stay trainable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import torch
from tokenizers import Tokenizer

from vlash.policies.pi05.model import Pi05Model
from vlash.policies.processing.word_tokenizer import STATE_BINS

MIN_CYCLES = 0.25  # lowest frequency: a quarter period over [-1, 1] (monotone in the value)
MAX_CYCLES = 64.0  # highest: a period of 4 bins (fine resolution)


def bin_value(token: str) -> float:
    """The centre in [-1, 1] of a state bin token ("-1": just below -1)."""
    return (int(token) + 0.5) / 256 * 2.0 - 1.0


def value_code(values: torch.Tensor, width: int) -> torch.Tensor:
    """[n] values -> [n, width] sin/cos code at geometric frequencies from MIN_CYCLES to MAX_CYCLES."""
    half = width // 2
    cycles = MIN_CYCLES * (MAX_CYCLES / MIN_CYCLES) ** torch.linspace(0.0, 1.0, half, dtype=torch.float64)
    angle = math.pi * values.double()[:, None] * cycles[None, :]
    code = torch.cat([angle.sin(), angle.cos()], dim=1) * math.sqrt(2.0)  # unit mean square per entry
    return torch.nn.functional.pad(code, (0, width - 2 * half))


def tokenizer_vocab(tokenizer_file: str | Path) -> dict[str, int]:
    return Tokenizer.from_file(str(tokenizer_file)).get_vocab()


def grid_code(side: int, width: int) -> torch.Tensor:
    """[side * side, width]: row-major patches -> half the channels a sin/cos code of the row, half of
    the column (geometric frequencies from a quarter period over the image, monotone in the position, to
    one period per 4 patches), unit mean square."""
    quarter = width // 4
    cycles = 0.25 * (side / 1.0) ** torch.linspace(0.0, 1.0, quarter, dtype=torch.float64)
    pos = (torch.arange(side, dtype=torch.float64) + 0.5) / side  # patch centres in (0, 1)
    angle = 2.0 * math.pi * pos[:, None] * cycles[None, :]  # [side, quarter]
    axis = torch.cat([angle.sin(), angle.cos()], dim=1)  # [side, 2 * quarter]
    rows = axis[:, None, :].expand(side, side, -1)
    cols = axis[None, :, :].expand(side, side, -1)
    code = torch.cat([rows, cols], dim=2).reshape(side * side, 4 * quarter) * math.sqrt(2.0)
    return torch.nn.functional.pad(code, (0, width - 4 * quarter))


@torch.no_grad()
def init_from_scratch(model: Pi05Model, vocab: Mapping[str, int] | None = None) -> None:
    """The initialisation `vlash train` starts from (see the module docstring); `vocab` adds the state-bin
    code. The weight layout is unchanged, so checkpoints load as usual."""
    embed = model.vlm.embed_tokens.weight
    embed.normal_(0.0, embed.shape[1] ** -0.5)
    positions = model.vision.embeddings.position_embedding.weight
    side = math.isqrt(positions.shape[0])
    if side * side == positions.shape[0]:
        positions.copy_(grid_code(side, positions.shape[1]).to(positions.dtype))
    if vocab is not None:
        init_state_bin_embeddings(model, vocab)


@torch.no_grad()
def init_state_bin_embeddings(model: Pi05Model, vocab: Mapping[str, int]) -> int:
    """Overwrite the embedding rows of the state-bin tokens in `vocab`; returns how many rows were set."""
    weight = model.vlm.embed_tokens.weight
    pairs = [(vocab[tok], bin_value(tok)) for tok in STATE_BINS if tok in vocab and vocab[tok] < weight.shape[0]]
    if not pairs:
        return 0
    ids = torch.tensor([i for i, _ in pairs])
    code = value_code(torch.tensor([v for _, v in pairs]), weight.shape[1])
    scale = weight.float().std().item()  # keep the random rows' magnitude
    weight[ids] = (code * scale).to(weight.dtype)
    return len(pairs)
