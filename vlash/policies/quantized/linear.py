"""Weight-only quantized drop-ins for nn.Linear: weights stored int8 / packed int4, dequantized on the fly.

Activations keep the model's dtype; the matmul runs in it (CPU and CUDA alike). The point is memory
(weights 4x / ~7x smaller than fp32), not speed on CPU, where the dequantize adds ~10% per call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vlash.policies.quantized.packing import (
    check_group_size,
    dequantize_int4,
    dequantize_int8,
    quantize_int4,
    quantize_int8,
)


class _WeightOnlyLinear(nn.Module):
    """Common part: shapes, optional bias (kept in the compute dtype), dequantize + F.linear."""

    scheme = "abstract"

    def __init__(self, in_features: int, out_features: int, bias: bool, dtype: torch.dtype) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.compute_dtype = dtype
        self.bias = nn.Parameter(torch.zeros(out_features, dtype=dtype), requires_grad=False) if bias else None

    def dequantize(self) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.dequantize().to(x.dtype), None if self.bias is None else self.bias.to(x.dtype))

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, scheme={self.scheme}, bias={self.bias is not None}"


class Int8WeightLinear(_WeightOnlyLinear):
    """int8 weight [out, in] with one fp32 scale per output channel."""

    scheme = "int8"

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: torch.dtype = torch.float32):
        super().__init__(in_features, out_features, bias, dtype)
        self.register_buffer("qweight", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("scale", torch.ones(out_features, dtype=torch.float32))

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Int8WeightLinear:
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, linear.weight.dtype)
        layer.qweight, layer.scale = quantize_int8(linear.weight)
        layer.to(linear.weight.device)
        _copy_bias(linear, layer)
        return layer

    def dequantize(self) -> Tensor:
        return dequantize_int8(self.qweight, self.scale)


class Int4WeightLinear(_WeightOnlyLinear):
    """int4 weight packed two per byte [out, in / 2] with one fp32 scale per (row, group of inputs)."""

    scheme = "int4"

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        dtype: torch.dtype = torch.float32,
        group_size: int = 64,
    ) -> None:
        check_group_size(in_features, group_size)
        super().__init__(in_features, out_features, bias, dtype)
        self.group_size = group_size
        self.register_buffer("qweight", torch.zeros(out_features, in_features // 2, dtype=torch.uint8))
        self.register_buffer("scale", torch.ones(out_features, in_features // group_size, dtype=torch.float32))

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int = 64) -> Int4WeightLinear:
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, linear.weight.dtype, group_size)
        layer.qweight, layer.scale = quantize_int4(linear.weight, group_size)
        layer.to(linear.weight.device)
        _copy_bias(linear, layer)
        return layer

    def dequantize(self) -> Tensor:
        return dequantize_int4(self.qweight, self.scale)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, group_size={self.group_size}"


def _copy_bias(linear: nn.Linear, layer: _WeightOnlyLinear) -> None:
    if linear.bias is not None and layer.bias is not None:
        with torch.no_grad():
            layer.bias.copy_(linear.bias.detach())
