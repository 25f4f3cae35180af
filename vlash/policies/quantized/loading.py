"""Load a weight-only quantized pi0.5 policy (runtime phase): rebuild the module tree the manifest
(`quant.json`) describes on the meta device and assign the stored int8 / packed int4 tensors. Writing such a
directory is the offline phase, vlash.quant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from vlash.errors import CheckpointError
from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.pi05.weights import read_safetensors, resolve_dtype
from vlash.policies.quantized.linear import Fp8Linear, Int4WeightLinear, Int8WeightLinear
from vlash.policies.quantized.manifest import QuantManifest


def swap_module(model: nn.Module, name: str, new: nn.Module) -> None:
    """Replace the submodule `name` of `model` by `new`."""
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


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
            swap_module(model, name, Int4WeightLinear(*args, group_size=spec["group_size"]))
        elif spec["dtype"] == "fp8":
            swap_module(model, name, Fp8Linear(*args))
        else:
            swap_module(model, name, Int8WeightLinear(*args))


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
        if isinstance(module, Int8WeightLinear | Int4WeightLinear | Fp8Linear):
            module.compute_dtype = torch_dtype
    model.quant_scheme = manifest.scheme  # type: ignore[attr-defined]  (engines report it)
    return model.to(device).eval()
