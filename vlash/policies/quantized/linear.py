"""Quantized drop-ins for nn.Linear.

int8 / int4 (weight-only): weights stored int8 / packed int4, dequantized on the fly; activations keep the model's
dtype and the matmul runs in it (CPU and CUDA alike). The point is memory (weights 4x / ~7x smaller than fp32), not
speed on CPU, where the dequantize adds ~10% per call.

fp8 (W8A8): weights stored fp8 e4m3 with a scale per output channel, activations quantized to fp8 per token as they
come, the product taken by torch._scaled_mm: fp8 tensor cores on Hopper and Ada (half the bytes and twice the peak
of bf16); the CPU runs the same op (slowly), which is how its arithmetic is tested. A GPU without fp8 matmuls
dequantizes the weights instead (weight-only).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vlash.policies.quantized.packing import (
    FP8,
    check_group_size,
    dequantize_int4,
    dequantize_int8,
    quantize_fp8_rows,
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


def fp8_matmul_supported(device: torch.device) -> bool:
    """Whether torch._scaled_mm multiplies fp8 on `device`: the CPU, and CUDA GPUs of compute capability >= 8.9
    (Ada, Hopper, Blackwell)."""
    if device.type == "cpu":
        return True
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


class Fp8Linear(_WeightOnlyLinear):
    """fp8 e4m3 weight [out, in] with one fp32 scale per output channel; activations quantized per token (W8A8)."""

    scheme = "fp8"

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: torch.dtype = torch.bfloat16):
        super().__init__(in_features, out_features, bias, dtype)
        self.register_buffer("qweight", torch.zeros(out_features, in_features, dtype=FP8))
        self.register_buffer("scale", torch.ones(out_features, dtype=torch.float32))
        self._fp8_matmul: bool | None = None  # decided on the first call, on the weights' device

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Fp8Linear:
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, linear.weight.dtype)
        qweight, scale = quantize_fp8_rows(linear.weight)
        layer.qweight, layer.scale = qweight, scale[:, 0]
        layer.to(linear.weight.device)
        _copy_bias(linear, layer)
        return layer

    def dequantize(self) -> Tensor:
        return self.qweight.float() * self.scale[:, None]

    def forward(self, x: Tensor) -> Tensor:
        if self._fp8_matmul is None:
            self._fp8_matmul = fp8_matmul_supported(self.qweight.device)
        if not self._fp8_matmul or (x.requires_grad and torch.is_grad_enabled()):  # guided RTC differentiates in x:
            return super().forward(x)  # rounding x to fp8 has no gradient, so the dequantized weights serve it
        xq, x_scale = quantize_fp8_rows(x.reshape(-1, self.in_features))
        # out_dtype bf16: what row-wise scaling takes on CUDA; fp32 models cast back
        w_scale = self.scale[None, :]
        y = torch._scaled_mm(xq, self.qweight.t(), scale_a=x_scale, scale_b=w_scale, out_dtype=torch.bfloat16)
        y = y.to(x.dtype) if self.bias is None else y.to(x.dtype) + self.bias.to(x.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)


def _copy_bias(linear: nn.Linear, layer: _WeightOnlyLinear) -> None:
    if linear.bias is not None and layer.bias is not None:
        with torch.no_grad():
            layer.bias.copy_(linear.bias.detach())
