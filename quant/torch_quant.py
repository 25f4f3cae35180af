"""Weight-only quantization of a pi0.5 torch model (offline): plan which Linear layers get which format and swap
them for `vlash.policies.quantized.linear` modules. Loading the result is vlash.policies.quantized.loading."""

from __future__ import annotations

from typing import Any

from torch import nn

from vlash.errors import ConfigError
from vlash.policies.quantized.linear import Fp8Linear, Int4WeightLinear, Int8WeightLinear
from vlash.policies.quantized.loading import swap_module
from vlash.policies.quantized.schemes import FP8_ALIGNMENT, KEEP_PATTERNS, VLM_PATTERNS, get_scheme, matches

DEFAULT_GROUP_SIZE = 64


def plan_layers(
    model: nn.Module, scheme: str, group_size: int = DEFAULT_GROUP_SIZE
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(module name -> layer spec, names kept in the compute dtype) for a torch scheme."""
    if get_scheme(scheme).engine != "torch":
        raise ConfigError(f"scheme {scheme!r} is not a torch weight-only scheme")
    layers: dict[str, dict[str, Any]] = {}
    kept: list[str] = []
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        if matches(name, KEEP_PATTERNS):
            kept.append(name)
            continue
        if scheme == "torch-fp8":
            if module.in_features % FP8_ALIGNMENT or module.out_features % FP8_ALIGNMENT:
                kept.append(name)  # _scaled_mm's shape rule: this layer stays in the compute dtype
            else:
                layers[name] = {"dtype": "fp8", "granularity": "per-channel", "activations": "fp8 per token"}
            continue
        int4_ok = scheme == "torch-int4" and matches(name, VLM_PATTERNS) and module.in_features % group_size == 0
        if int4_ok:
            layers[name] = {"dtype": "int4", "granularity": "group", "group_size": group_size}
        else:
            layers[name] = {"dtype": "int8", "granularity": "per-channel"}
    return layers, kept


def quantize_model(model: nn.Module, layers: dict[str, dict[str, Any]]) -> nn.Module:
    """Replace the planned nn.Linear modules by quantized ones, in place (weights quantized now)."""
    for name, spec in layers.items():
        linear = model.get_submodule(name)
        if not isinstance(linear, nn.Linear):
            raise ConfigError(f"quantize: {name!r} is {type(linear).__name__}, not nn.Linear")
        if spec["dtype"] == "int4":
            swap_module(model, name, Int4WeightLinear.from_linear(linear, spec["group_size"]))
        elif spec["dtype"] == "fp8":
            swap_module(model, name, Fp8Linear.from_linear(linear))
        else:
            swap_module(model, name, Int8WeightLinear.from_linear(linear))
    return model


def weight_bytes(model: nn.Module) -> int:
    """Bytes of all parameters and buffers (what the weights cost in memory)."""
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)
