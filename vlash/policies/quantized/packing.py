"""Weight quantization primitives: int8 per-output-channel and int4 group-wise (two values per byte).

Both are symmetric (zero point 0). Layouts, for a Linear weight w [out, in]:
    int8: qweight int8 [out, in], scale fp32 [out]                    w ~= qweight * scale[:, None]
    int4: qweight uint8 [out, in / 2], scale fp32 [out, in / group]   w ~= (q - 8) * scale per group,
          q in 0..15; column 2j in the low nibble of byte j, column 2j + 1 in the high nibble.
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlash.errors import ConfigError

INT8_MAX = 127
FP8 = torch.float8_e4m3fn  # OCP e4m3: 3 mantissa bits, finite range +-448 (what Hopper's and Ada's tensor cores take)
FP8_MAX = 448.0
INT4_MIN, INT4_MAX = -8, 7
_EPS = 1e-12  # an all-zero row/group gets a tiny scale instead of a division by zero


def quantize_int8(weight: Tensor) -> tuple[Tensor, Tensor]:
    """w [out, in] -> (qweight int8 [out, in], scale fp32 [out]); symmetric, range -127..127."""
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / INT8_MAX).clamp_min(_EPS)
    q = torch.round(w / scale[:, None]).clamp_(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


def dequantize_int8(qweight: Tensor, scale: Tensor) -> Tensor:
    return qweight.float() * scale[:, None]


def quantize_fp8_rows(values: Tensor) -> tuple[Tensor, Tensor]:
    """x [rows, n] -> (fp8 e4m3 [rows, n], fp32 scale [rows, 1]), x ~= q * scale: one scale per row (a weight's output
    channel, an activation's token), the row's absolute maximum mapped to +-448."""
    x = values.detach().float()
    scale = (x.abs().amax(dim=1, keepdim=True) / FP8_MAX).clamp_min(_EPS)
    return (x / scale).clamp_(-FP8_MAX, FP8_MAX).to(FP8), scale


def check_group_size(in_features: int, group_size: int) -> None:
    if group_size < 2 or group_size % 2:
        raise ConfigError(f"int4 group_size must be an even integer >= 2, got {group_size}")
    if in_features % group_size:
        raise ConfigError(f"int4: in_features {in_features} is not a multiple of group_size {group_size}")


def quantize_int4(weight: Tensor, group_size: int) -> tuple[Tensor, Tensor]:
    """w [out, in] -> (packed uint8 [out, in / 2], scale fp32 [out, in / group_size]); symmetric -8..7."""
    out_features, in_features = weight.shape
    check_group_size(in_features, group_size)
    groups = weight.detach().float().view(out_features, in_features // group_size, group_size)
    scale = (groups.abs().amax(dim=2) / INT4_MAX).clamp_min(_EPS)
    q = torch.round(groups / scale[..., None]).clamp_(INT4_MIN, INT4_MAX).to(torch.int16)
    return pack_int4(q.view(out_features, in_features)), scale


def pack_int4(values: Tensor) -> Tensor:
    """Signed int4 values [out, in] (in -8..7, in even) -> uint8 [out, in / 2], two per byte."""
    if values.shape[-1] % 2:
        raise ConfigError(f"int4 packing needs an even number of columns, got {values.shape[-1]}")
    shifted = (values.to(torch.int16) - INT4_MIN).to(torch.uint8)  # 0..15
    return shifted[..., 0::2] | (shifted[..., 1::2] << 4)


def unpack_int4(packed: Tensor) -> Tensor:
    """uint8 [out, n] -> signed int4 values int8 [out, 2n] (inverse of `pack_int4`)."""
    low = (packed & 0x0F).to(torch.int8) + INT4_MIN
    high = (packed >> 4).to(torch.int8) + INT4_MIN
    return torch.stack([low, high], dim=-1).flatten(-2)


def dequantize_int4(packed: Tensor, scale: Tensor) -> Tensor:
    out_features, groups = scale.shape
    values = unpack_int4(packed).float().view(out_features, groups, -1)
    return (values * scale[..., None]).view(out_features, -1)
