"""Quantization schemes and which modules each one touches (defaults from the literature).

- The action expert's attention projections, its adaRMS/time MLP and the action in/out projections stay
  in the compute dtype: they run 10x per chunk and errors there compound through the Euler integration
  (which the sampler keeps in fp32 anyway).
- 4-bit only on the VLM side (SigLIP, projector, Gemma VLM); the expert's MLPs get at most 8 bits.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from vlash.errors import ConfigError


@dataclass(frozen=True)
class Scheme:
    name: str  # CLI / manifest name
    engine: str  # engine that runs the artifact
    summary: str  # one line for --help and tables
    weights: str  # the precision of the quantized weights, what reports call the artifact ("int8", "int4", ...)
    calibrated: bool = False  # needs calibration frames (static activation ranges)


SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("torch-int8", "torch", "weight-only int8 per output channel (VLM + expert MLPs)", "int8"),
        Scheme("torch-int4", "torch", "weight-only int4 group-wise on the VLM, int8 on the expert MLPs", "int4"),
        Scheme("torch-fp8", "torch", "fp8 e4m3 weights and per-token activations (W8A8, _scaled_mm)", "fp8"),
        Scheme("onnx-int8-dynamic", "onnxruntime", "ONNX int8 dynamic (7-bit weights, activations per call)", "int8"),
        Scheme("onnx-int8-static", "onnxruntime", "ONNX int8 static QDQ, calibrated on sim frames", "int8", True),
        Scheme("trt-fp16", "tensorrt", "TensorRT FP16", "fp16"),
        Scheme("trt-bf16", "tensorrt", "TensorRT BF16", "bf16"),
        Scheme("trt-fp8", "tensorrt", "TensorRT FP8 (explicit QDQ), calibrated on sim frames", "fp8", True),
        Scheme("trt-int8", "tensorrt", "TensorRT INT8 (explicit QDQ), calibrated on sim frames", "int8", True),
    )
}

# Linear modules never quantized (matched with fnmatch against the module's qualified name).
KEEP_PATTERNS: tuple[str, ...] = (
    "expert.layers.*.self_attn.*",  # action-expert attention projections
    "expert.layers.*layernorm.dense",  # adaRMS scale/shift/gate
    "expert.norm.dense",
    "action_in_proj",
    "action_out_proj",
    "time_mlp_*",
)
VLM_PATTERNS: tuple[str, ...] = ("vision.*", "projector", "vlm.*")  # where 4 bits are allowed
FP8_ALIGNMENT = 16  # torch._scaled_mm on CUDA takes fp8 matrices whose inner and output sizes are multiples of 16


def precision_label(scheme: str | None, dtype: str) -> str:
    """What a report calls a model's precision: `dtype` for a float model; for a quantized one its weights'
    precision with the scheme and the dtype its activations run in, e.g. "int8 (onnx-int8-dynamic) / fp32
    activations" (the graphs' and engines' own dtype is the activations', never the weights')."""
    if not scheme:
        return dtype
    weights = SCHEMES[scheme].weights if scheme in SCHEMES else scheme
    return f"{weights} ({scheme}) / {dtype} activations"


def get_scheme(name: str) -> Scheme:
    if name not in SCHEMES:
        raise ConfigError(f"unknown quantization scheme {name!r}; choose one of {', '.join(SCHEMES)}")
    return SCHEMES[name]


def matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)
