"""pi0.5 in plain PyTorch: SigLIP + Gemma VLM prefix, Gemma action expert with adaRMS time conditioning.

The unit of every engine is the split
    prefill(inputs) -> PrefixCache          # images + prompt through the VLM, once per observation
    denoise_step(x_t, tau, cache) -> v      # action expert, per-token time tau [B, H] (or [B, 1]: shared)
At layer l the action tokens attend to VLM layer l's cached K/V plus their own (joint attention).
`forward_joint` runs prefix and suffix in one pass (training path; equals prefill + denoise_step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vlash.errors import ShapeError
from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.gemma import GemmaStack
from vlash.policies.pi05.layers import allowed_from_ar, attend, attention_bias, rope_tables
from vlash.policies.pi05.siglip import SiglipVisionTower


@dataclass
class Pi05Inputs:
    """A model-ready batch (after preprocessing)."""

    images: Tensor  # [B, C, 3, S, S] float in [-1, 1], cameras in config order
    image_masks: Tensor  # [B, C] bool, False = camera absent (its tokens are masked out)
    tokens: Tensor  # [B, L] int64 prompt ids, right-padded
    token_masks: Tensor  # [B, L] bool, False = padding

    @property
    def batch_size(self) -> int:
        return self.tokens.shape[0]


@dataclass
class PrefixCache:
    """Everything a denoise step needs from the observation; fixed for all N steps."""

    keys: Tensor  # [depth, B, K, P, hd] post-RoPE keys of every VLM layer
    values: Tensor  # [depth, B, K, P, hd]
    suffix_bias: Tensor  # [B, 1, H, P + H] additive attention bias of the action tokens
    suffix_cos: Tensor  # [B, 1, H, hd/2] RoPE tables at the action positions
    suffix_sin: Tensor

    def select(self, rows: Tensor) -> PrefixCache:
        """The cache of batch rows `rows` (int64 index on the cache's device), in that order."""
        return PrefixCache(
            keys=self.keys.index_select(1, rows),
            values=self.values.index_select(1, rows),
            suffix_bias=self.suffix_bias.index_select(0, rows),
            suffix_cos=self.suffix_cos.index_select(0, rows),
            suffix_sin=self.suffix_sin.index_select(0, rows),
        )


def sincos_frequencies(dim: int, min_period: float, max_period: float, dtype: torch.dtype = torch.float32) -> Tensor:
    """openpi posemb_sincos angular frequencies 2*pi/period, periods log-spaced min..max, [dim/2] in `dtype`."""
    fraction = torch.linspace(0.0, 1.0, dim // 2, dtype=torch.float64)
    period = min_period * (max_period / min_period) ** fraction
    return (2.0 * math.pi / period).to(dtype)


def sincos_time_embedding(tau: Tensor, freq: Tensor) -> Tensor:
    """Per-token times tau [B, H] -> [B, H, 2 * len(freq)] fp32, [sin | cos], the arguments in freq's dtype (fp32 as
    openpi's JAX model; fp64 as LeRobot's, whose arguments reach 1571 rad)."""
    arg = tau.to(freq.dtype)[..., None] * freq
    return torch.cat([arg.sin(), arg.cos()], dim=-1).float()


class Pi05Model(nn.Module):
    def __init__(self, config: Pi05Config) -> None:
        super().__init__()
        self.config = config
        vlm_w, exp_w = config.vlm.width, config.expert.width
        self.vision = SiglipVisionTower(config.vision)
        self.projector = nn.Linear(config.vision.width, vlm_w)
        self.vlm = GemmaStack(config.vlm, vocab_size=config.vocab_size)
        self.expert = GemmaStack(config.expert, cond_dim=exp_w)
        self.action_in_proj = nn.Linear(config.action_dim, exp_w)
        self.action_out_proj = nn.Linear(exp_w, config.action_dim)
        self.time_mlp_in = nn.Linear(exp_w, exp_w)
        self.time_mlp_out = nn.Linear(exp_w, exp_w)
        self._time_freq: Tensor | None = None  # sin/cos frequencies, built on first use per device

    @property
    def dtype(self) -> torch.dtype:
        return self.action_in_proj.weight.dtype

    # ---------------------------------------------------------------- prefix
    def embed_prefix(self, inputs: Pi05Inputs) -> tuple[Tensor, Tensor]:
        """[image tokens per camera | text tokens] -> (tokens [B, P, W], valid mask [B, P])."""
        self._check_inputs(inputs)
        batch, cams = inputs.image_masks.shape
        patches = self.config.vision.num_patches
        flat = inputs.images.flatten(0, 1).to(self.dtype)
        image_tokens = self.projector(self.vision(flat)).view(batch, cams * patches, -1)
        image_valid = inputs.image_masks.repeat_interleave(patches, dim=1)
        text = self.vlm.embed_tokens(inputs.tokens)
        text = text * torch.tensor(math.sqrt(self.config.vlm.width), dtype=text.dtype)
        tokens = torch.cat([image_tokens, text], dim=1)
        return tokens, torch.cat([image_valid, inputs.token_masks.bool()], dim=1)

    @torch.no_grad()
    def prefill(self, inputs: Pi05Inputs) -> PrefixCache:
        """The prefix's keys and values at every VLM layer. The last layer's queries, attention and MLP are
        skipped: the action expert reads only its keys and values."""
        return self._encode_prefix(inputs, final_output=False)[0]

    def encode_prefix(self, inputs: Pi05Inputs) -> tuple[PrefixCache, Tensor]:
        """Prefill, also returning the VLM's final-norm output [B, P, W] (openpi's prefix_out; for checks)."""
        cache, out = self._encode_prefix(inputs, final_output=True)
        return cache, out

    def _encode_prefix(self, inputs: Pi05Inputs, final_output: bool) -> tuple[PrefixCache, Tensor | None]:
        x, valid, cos, sin, bias = self._prefix_setup(inputs)
        keys, values = [], []
        last = len(self.vlm.layers) - 1
        for index, layer in enumerate(self.vlm.layers):
            needed = final_output or index < last  # the last layer's output feeds only the final norm
            qkv = layer.project_qkv(x, cos, sin, queries=needed)
            keys.append(qkv.k)
            values.append(qkv.v)
            if needed:
                x = layer.finish(x, attend(qkv.q, qkv.k, qkv.v, bias), qkv)
        cache = self._make_cache(torch.stack(keys), torch.stack(values), valid)
        return cache, self.vlm.final_norm(x) if final_output else None

    def prefix_stream(self, inputs: Pi05Inputs, layer: int) -> Tensor:
        """The prefix's residual stream entering VLM layer `layer` [B, P, W], running only the layers before it
        (the prefix never sees the actions, so this equals forward_joint's tap; for training heads)."""
        self._check_prefix_layer(layer)
        x, _, cos, sin, bias = self._prefix_setup(inputs)
        for block in self.vlm.layers[:layer]:
            qkv = block.project_qkv(x, cos, sin)
            x = block.finish(x, attend(qkv.q, qkv.k, qkv.v, bias), qkv)
        return x

    def _prefix_setup(self, inputs: Pi05Inputs) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """(prefix tokens, valid mask, RoPE cos, sin, bidirectional attention bias) for a prefix-only pass."""
        x, valid = self.embed_prefix(inputs)
        cfg = self.config.vlm
        cos, sin = rope_tables(torch.cumsum(valid.long(), dim=1) - 1, cfg.head_dim, cfg.rope_base)
        return x, valid, cos, sin, attention_bias(valid[:, None, :] & valid[:, :, None], x.dtype)

    def _make_cache(self, keys: Tensor, values: Tensor, prefix_valid: Tensor) -> PrefixCache:
        batch, horizon = prefix_valid.shape[0], self.config.action_horizon
        device = prefix_valid.device
        suffix_valid = torch.ones(batch, horizon, dtype=torch.bool, device=device)
        allowed = torch.cat(
            [
                prefix_valid[:, None, :].expand(batch, horizon, -1),
                suffix_valid[:, :, None].expand(batch, horizon, horizon),
            ],
            dim=2,
        )
        positions = prefix_valid.long().sum(dim=1, keepdim=True) + torch.arange(horizon, device=device)
        cos, sin = rope_tables(positions, self.config.expert.head_dim, self.config.expert.rope_base)
        return PrefixCache(
            keys=keys, values=values, suffix_bias=attention_bias(allowed, keys.dtype), suffix_cos=cos, suffix_sin=sin
        )

    # ---------------------------------------------------------------- suffix
    def time_condition(self, tau: Tensor) -> Tensor:
        """adaRMS condition [B, T, W_expert] from flow times tau [B, T]: per token (T = H) or shared (T = 1)."""
        dtype = torch.float64 if self.config.time_embedding == "fp64" else torch.float32
        if self._time_freq is None or self._time_freq.device != tau.device or self._time_freq.dtype != dtype:
            cfg = self.config
            freq = sincos_frequencies(cfg.expert.width, cfg.time_min_period, cfg.time_max_period, dtype)
            self._time_freq = freq.to(tau.device)
        emb = sincos_time_embedding(tau, self._time_freq)
        return F.silu(self.time_mlp_out(F.silu(self.time_mlp_in(emb.to(self.dtype)))))

    def denoise_step(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        """Velocity v [B, H, A] (model dtype) for noisy actions x_t [B, H, A] at times tau: per token [B, H], or
        [B, 1] when all of a row's tokens share one time (the time MLP and every adaRMS Dense then run on one row per
        batch row instead of H, broadcast over the tokens; same result)."""
        self._check_suffix(x_t, tau)
        cond = self.time_condition(tau)
        x = self.action_in_proj(x_t.to(self.dtype))
        for layer, keys, values in zip(self.expert.layers, cache.keys, cache.values, strict=True):
            qkv = layer.project_qkv(x, cache.suffix_cos, cache.suffix_sin, cond)
            k = torch.cat([keys, qkv.k], dim=2)
            v = torch.cat([values, qkv.v], dim=2)
            x = layer.finish(x, attend(qkv.q, k, v, cache.suffix_bias), qkv, cond)
        return self.action_out_proj(self.expert.final_norm(x, cond))

    # ---------------------------------------------------------------- joint (training) path
    def forward_joint(
        self, inputs: Pi05Inputs, x_t: Tensor, tau: Tensor, prefix_layer: int | None = None
    ) -> Tensor | tuple[Tensor, Tensor]:
        """One forward over [prefix; actions] with openpi's training mask; returns v [B, H, A], and with
        `prefix_layer` = k also the prefix's residual stream entering VLM layer k [B, P, W] (k = depth: after
        the last layer), for training heads."""
        self._check_suffix(x_t, tau)
        if prefix_layer is not None:
            self._check_prefix_layer(prefix_layer)
        prefix, prefix_valid = self.embed_prefix(inputs)
        cond = self.time_condition(tau)
        suffix = self.action_in_proj(x_t.to(self.dtype))
        batch, plen, horizon = prefix.shape[0], prefix.shape[1], suffix.shape[1]
        valid = torch.cat([prefix_valid, prefix_valid.new_ones(batch, horizon)], dim=1)
        ar = torch.zeros(plen + horizon, dtype=torch.bool, device=valid.device)
        ar[plen] = True  # actions start a new block: prefix cannot see them, they see everything before
        bias = attention_bias(allowed_from_ar(valid, ar), prefix.dtype)
        cfg = self.config.vlm
        cos, sin = rope_tables(torch.cumsum(valid.long(), dim=1) - 1, cfg.head_dim, cfg.rope_base)
        split = (cos[:, :, :plen], sin[:, :, :plen]), (cos[:, :, plen:], sin[:, :, plen:])
        tapped = prefix if prefix_layer == 0 else None
        depth = len(self.vlm.layers)
        for index, (vlm_layer, exp_layer) in enumerate(zip(self.vlm.layers, self.expert.layers, strict=True)):
            # The prefix's output of the last layer is never read (the expert takes keys and values only),
            # unless a head taps it: skip its queries, attention rows and MLP.
            prefix_out = index < depth - 1 or prefix_layer == depth
            pq = vlm_layer.project_qkv(prefix, *split[0], queries=prefix_out)
            sq = exp_layer.project_qkv(suffix, *split[1], cond)
            k, v = (torch.cat([a, b.to(a.dtype)], dim=2) for a, b in ((pq.k, sq.k), (pq.v, sq.v)))
            if prefix_out:
                out = attend(torch.cat([pq.q, sq.q.to(pq.q.dtype)], dim=2), k, v, bias)
                prefix = vlm_layer.finish(prefix, out[:, :plen], pq)
                suffix = exp_layer.finish(suffix, out[:, plen:], sq, cond)
            else:
                out = attend(sq.q.to(k.dtype), k, v, bias[:, :, plen:])
                suffix = exp_layer.finish(suffix, out, sq, cond)
            if prefix_layer == index + 1:
                tapped = prefix
        v = self.action_out_proj(self.expert.final_norm(suffix, cond))
        return v if prefix_layer is None else (v, tapped)

    # ---------------------------------------------------------------- checks
    def _check_prefix_layer(self, layer: int) -> None:
        """A tap point of the prefix stream: the input of VLM layer 0..depth-1, or depth (after the last)."""
        if not 0 <= layer <= len(self.vlm.layers):
            raise ShapeError(f"prefix_layer must be in [0, {len(self.vlm.layers)}], got {layer}")

    def _check_inputs(self, inputs: Pi05Inputs) -> None:
        cfg = self.config
        size = cfg.vision.image_size
        batch = inputs.tokens.shape[0]
        want = {
            "images": (batch, cfg.num_cameras, 3, size, size),
            "image_masks": (batch, cfg.num_cameras),
            "tokens": (batch, cfg.max_token_len),
            "token_masks": (batch, cfg.max_token_len),
        }
        for name, shape in want.items():
            got = tuple(getattr(inputs, name).shape)
            if got != shape:
                raise ShapeError(f"pi05 inputs.{name}: expected {shape}, got {got}")

    def _check_suffix(self, x_t: Tensor, tau: Tensor) -> None:
        horizon, action_dim = self.config.action_horizon, self.config.action_dim
        if x_t.ndim != 3 or x_t.shape[1:] != (horizon, action_dim):
            raise ShapeError(f"pi05 x_t: expected [B, {horizon}, {action_dim}], got {tuple(x_t.shape)}")
        batch = x_t.shape[0]
        if tau.ndim != 2 or tau.shape[0] != batch or tau.shape[1] not in (1, horizon):
            raise ShapeError(
                f"pi05 tau: expected per-token times ({batch}, {horizon}) or one per row ({batch}, 1), "
                f"got {tuple(tau.shape)}"
            )
