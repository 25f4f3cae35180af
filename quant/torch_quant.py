"""Weight-only quantization of a pi0.5 torch model: plan which Linear layers get which format, swap them
for `quant.linear` modules (offline), or rebuild the same module tree from a manifest (runtime load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from quant.linear import Int4WeightLinear, Int8WeightLinear
from quant.manifest import QuantManifest
from quant.schemes import KEEP_PATTERNS, VLM_PATTERNS, get_scheme, matches
from vlash.errors import CheckpointError, ConfigError
from vlash.policies.checkpoint import read_safetensors, resolve_dtype
from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.model import Pi05Model

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
        int4_ok = scheme == "torch-int4" and matches(name, VLM_PATTERNS) and module.in_features % group_size == 0
        if int4_ok:
            layers[name] = {"dtype": "int4", "granularity": "group", "group_size": group_size}
        else:
            layers[name] = {"dtype": "int8", "granularity": "per-channel"}
    return layers, kept


def _swap(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


def quantize_model(model: nn.Module, layers: dict[str, dict[str, Any]]) -> nn.Module:
    """Replace the planned nn.Linear modules by quantized ones, in place (weights quantized now)."""
    for name, spec in layers.items():
        linear = model.get_submodule(name)
        if not isinstance(linear, nn.Linear):
            raise ConfigError(f"quantize: {name!r} is {type(linear).__name__}, not nn.Linear")
        if spec["dtype"] == "int4":
            _swap(model, name, Int4WeightLinear.from_linear(linear, spec["group_size"]))
        else:
            _swap(model, name, Int8WeightLinear.from_linear(linear))
    return model


def empty_quantized_layers(model: nn.Module, layers: dict[str, dict[str, Any]], dtype: torch.dtype) -> None:
    """Replace the planned nn.Linear modules by empty quantized ones (to be filled by load_state_dict)."""
    for name, spec in layers.items():
        try:
            linear = model.get_submodule(name)
        except AttributeError as exc:
            raise CheckpointError(f"quant manifest names {name!r}, which this model does not have") from exc
        if not isinstance(linear, nn.Linear):
            raise CheckpointError(f"quant manifest names {name!r}, a {type(linear).__name__}, not a Linear")
        args = (linear.in_features, linear.out_features, linear.bias is not None, dtype)
        if spec["dtype"] == "int4":
            _swap(model, name, Int4WeightLinear(*args, group_size=spec["group_size"]))
        else:
            _swap(model, name, Int8WeightLinear(*args))


def load_quantized_model(
    config: Pi05Config,
    directory: str | Path,
    dtype: str | torch.dtype = "fp32",
    device: str | torch.device = "cpu",
) -> Pi05Model:
    """Build pi05 on the meta device, swap in the manifest's quantized layers and assign the stored tensors.

    Quantized buffers keep their int8/uint8/fp32-scale types; the other parameters are cast to `dtype`.
    """
    manifest = QuantManifest.read(directory)
    if manifest.engine != "torch":
        raise CheckpointError(f"{directory}: scheme {manifest.scheme!r} runs on {manifest.engine!r}, not torch")
    torch_dtype = resolve_dtype(dtype)
    with torch.device("meta"):
        model = Pi05Model(config)
        empty_quantized_layers(model, manifest.layers, torch_dtype)
    state = read_safetensors(Path(directory) / manifest.files.get("model", "model.safetensors"))
    state = {k: v if k.endswith((".qweight", ".scale")) else v.to(torch_dtype) for k, v in state.items()}
    try:
        model.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{directory}: quantized weights do not match the manifest: {exc}") from exc
    for module in model.modules():
        if isinstance(module, Int8WeightLinear | Int4WeightLinear):
            module.compute_dtype = torch_dtype
    model.quant_scheme = manifest.scheme  # type: ignore[attr-defined]  (engines report it)
    return model.to(device).eval()


def weight_bytes(model: nn.Module) -> int:
    """Bytes of all parameters and buffers (what the weights cost in memory)."""
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)
