"""The roofline floor of pi0.5's two graphs on a device profile, from the model config alone.

floor = max(bytes touched / memory bandwidth, FLOPs / peak throughput), per prefill and per denoise step.
Bytes: every weight the graph reads once (the token embedding: only the prompt's rows) plus the K/V cache
(written by prefill, read by every step). FLOPs: 2 per multiply-accumulate of the matmuls and attention;
norms, softmax and elementwise work are left out (they are bandwidth-bound and fuse into neighbours).
"""

from __future__ import annotations

from dataclasses import dataclass

from vlash.devices.profile import DeviceProfile
from vlash.errors import ConfigError
from vlash.policies.pi05.config import GemmaConfig, Pi05Config

BYTES_PER_ELEMENT = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "nvfp4": 0.5}
ALIASES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}  # torch dtype names


def canonical_precision(precision: str) -> str:
    """Torch dtype names ("float32") -> ours ("fp32"); ConfigError for a precision without a byte size."""
    name = ALIASES.get(precision, precision)
    if name not in BYTES_PER_ELEMENT:
        raise ConfigError(f"roofline: unknown precision {precision!r}; known: {sorted(BYTES_PER_ELEMENT)}")
    return name


@dataclass(frozen=True)
class Work:
    flops: float  # floating point operations
    weight_bytes: float  # weights read
    kv_bytes: float  # K/V cache written (prefill) or read (denoise step)

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes


@dataclass(frozen=True)
class Floor:
    memory_s: float  # bytes / bandwidth
    compute_s: float  # flops / peak
    work: Work

    @property
    def seconds(self) -> float:
        return max(self.memory_s, self.compute_s)

    @property
    def bound(self) -> str:
        return "memory" if self.memory_s >= self.compute_s else "compute"


def _gemma_layer_params(cfg: GemmaConfig, cond_dim: int | None) -> int:
    attn = cfg.width * cfg.head_dim * (2 * cfg.num_heads + 2 * cfg.num_kv_heads)
    norms = 2 * (cond_dim * 3 * cfg.width + 3 * cfg.width) if cond_dim else 2 * cfg.width
    return attn + 3 * cfg.width * cfg.mlp_dim + norms


def _gemma_layer_flops(cfg: GemmaConfig, queries: int, keys: int, cond_dim: int | None) -> float:
    proj = cfg.width * cfg.head_dim * (2 * cfg.num_heads + 2 * cfg.num_kv_heads) + 3 * cfg.width * cfg.mlp_dim
    norms = 2 * cond_dim * 3 * cfg.width if cond_dim else 0
    attention = 2 * keys * cfg.num_heads * cfg.head_dim  # QK^T and AV per query
    return 2.0 * queries * (proj + norms + attention)


def prefill_work(config: Pi05Config, precision: str, batch: int = 1) -> Work:
    v, g, cams = config.vision, config.vlm, config.num_cameras
    n = v.num_patches
    vis_layer = 4 * v.width * v.width + 2 * v.width * v.mlp_dim
    vis_params = 3 * v.patch_size**2 * v.width + n * v.width + v.depth * vis_layer
    proj_params = v.width * g.width
    vlm_params = g.depth * _gemma_layer_params(g, None) + config.max_token_len * g.width  # embedding rows read
    vis_flops = cams * (2.0 * n * 3 * v.patch_size**2 * v.width + v.depth * 2.0 * (n * vis_layer + 2 * n * n * v.width))
    prefix = config.prefix_len
    flops = vis_flops + 2.0 * cams * n * proj_params + g.depth * _gemma_layer_flops(g, prefix, prefix, None)
    size = BYTES_PER_ELEMENT[precision]
    kv = 2 * g.depth * g.num_kv_heads * prefix * g.head_dim
    return Work(batch * flops, (vis_params + proj_params + vlm_params) * size, batch * kv * size)


def denoise_work(config: Pi05Config, precision: str, batch: int = 1) -> Work:
    e, g, horizon, act = config.expert, config.vlm, config.action_horizon, config.action_dim
    small = 2 * e.width * e.width + 2 * act * e.width + e.width * 3 * e.width  # time MLP, in/out proj, final adaRMS
    params = e.depth * _gemma_layer_params(e, e.width) + small
    keys = config.prefix_len + horizon
    flops = e.depth * _gemma_layer_flops(e, horizon, keys, e.width) + 2.0 * horizon * small
    size = BYTES_PER_ELEMENT[precision]
    kv = 2 * g.depth * g.num_kv_heads * config.prefix_len * g.head_dim
    return Work(batch * flops, params * size, batch * kv * size)


def floor(work: Work, profile: DeviceProfile, precision: str) -> Floor:
    return Floor(work.bytes / profile.bandwidth, work.flops / profile.peak_flops(precision), work)


def model_floors(config: Pi05Config, profile: DeviceProfile, precision: str, batch: int = 1) -> dict[str, Floor]:
    """{"prefill": Floor, "step": Floor} of `config` at `precision` on `profile`."""
    precision = canonical_precision(precision)
    return {
        "prefill": floor(prefill_work(config, precision, batch), profile, precision),
        "step": floor(denoise_work(config, precision, batch), profile, precision),
    }
