"""Exported engine artifacts: the directory layout, the manifest, and the tensors crossing the two graphs.

    OUT/
      manifest.json   ArtifactManifest: engine, precision, batch, opset, model config, files, tensor specs
      prefill.onnx    images + prompt -> the PrefixCache fields, as explicit tensors
      denoise.onnx    x_t, tau + the PrefixCache tensors -> velocity
      policy/         a vlash policy directory (config, weights, stats, tokenizer): the server's processor
      *.plan          TensorRT engines, when built (listed in manifest.files)

Shapes are static (one artifact serves one batch size), except tau's time axis: H or 1 (`TIME_TOKENS_AXIS`). The
names and order of the PrefixCache tensors are the field order of `vlash.policies.pi05.model.PrefixCache`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vlash.atomic import atomic_write
from vlash.dataclass_io import dataclass_from_mapping
from vlash.errors import ConfigError
from vlash.policies.pi05.config import Pi05Config, config_from_dict
from vlash.policies.quantized import schemes
from vlash.policies.quantized.gate import RecordedGate

FORMAT = "vlash.engine-artifact/1"
MANIFEST = "manifest.json"
POLICY_DIR = "policy"
PRECISIONS = ("fp32", "fp16")  # what the ONNX exporter writes; quantizers may record others
CACHE_TENSORS = ("keys", "values", "suffix_bias", "suffix_cos", "suffix_sin")
PREFILL_INPUTS = ("images", "image_masks", "tokens", "token_masks")
PREFILL_OUTPUTS = CACHE_TENSORS
DENOISE_INPUTS = ("x_t", "tau", *CACHE_TENSORS)
DENOISE_OUTPUTS = ("velocity",)
TIME_TOKENS_AXIS = "time_tokens"  # tau's axis 1 in denoise.onnx: H (per token) or 1 (shared); older exports: static H


def tensor_specs(config: Pi05Config, batch: int, precision: str) -> dict[str, dict[str, Any]]:
    """name -> {"shape": [...], "dtype": numpy dtype name} of every graph input and output."""
    model = {"fp32": "float32", "fp16": "float16"}.get(precision, "float32")
    b, cams, size, length = batch, config.num_cameras, config.vision.image_size, config.max_token_len
    depth, kv, hd = config.vlm.depth, config.vlm.num_kv_heads, config.vlm.head_dim
    prefix, horizon, act = config.prefix_len, config.action_horizon, config.action_dim
    specs = {
        "images": ([b, cams, 3, size, size], "float32"),
        "image_masks": ([b, cams], "bool"),
        "tokens": ([b, length], "int64"),
        "token_masks": ([b, length], "bool"),
        "keys": ([depth, b, kv, prefix, hd], model),
        "values": ([depth, b, kv, prefix, hd], model),
        "suffix_bias": ([b, 1, horizon, prefix + horizon], model),
        "suffix_cos": ([b, 1, horizon, config.expert.head_dim // 2], "float32"),
        "suffix_sin": ([b, 1, horizon, config.expert.head_dim // 2], "float32"),
        "x_t": ([b, horizon, act], "float32"),
        "tau": ([b, horizon], "float32"),
        "velocity": ([b, horizon, act], "float32"),
    }
    return {name: {"shape": shape, "dtype": dtype} for name, (shape, dtype) in specs.items()}


@dataclass
class ArtifactManifest:
    engine: str  # backend that runs the artifact ("onnxruntime", "tensorrt")
    precision: str  # weights/activations precision of the graphs ("fp32", "fp16", or a quantizer's name)
    batch: int  # static batch size of every graph
    config: dict[str, Any]  # Pi05Config.to_dict() of the exported model
    policy: str = ""  # model id shown to clients
    opset: int = 17  # ONNX opset of the graphs
    files: dict[str, str] = field(default_factory=dict)  # graph -> file the engine loads ("prefill", "denoise")
    onnx: dict[str, str] = field(default_factory=dict)  # graph -> ONNX file (always written)
    tensors: dict[str, dict[str, Any]] = field(default_factory=dict)  # tensor_specs() at export time
    quantization: dict[str, Any] | None = None  # the scheme, written by the quantizer (never inferred)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    torch: str = ""  # torch version that exported the graphs
    notes: dict[str, Any] = field(default_factory=dict)  # free-form provenance
    format: str = FORMAT

    def __post_init__(self) -> None:
        if self.format != FORMAT:
            raise ConfigError(f"artifact format {self.format!r} is not {FORMAT!r}")
        if self.batch < 1:
            raise ConfigError(f"artifact batch must be >= 1, got {self.batch}")

    @property
    def model_config(self) -> Pi05Config:
        return config_from_dict(self.config)

    @property
    def quant_gate(self) -> RecordedGate | None:
        """The fidelity gate `vlash quantize --check` recorded (None: not a quantized artifact)."""
        return RecordedGate.from_quantization(self.quantization)

    @property
    def precision_label(self) -> str:
        """What reports call this artifact's precision: the graphs' dtype, or for a quantized artifact e.g.
        "int8 (onnx-int8-dynamic) / fp32 activations"."""
        return schemes.precision_label((self.quantization or {}).get("scheme"), self.precision)

    def path(self, directory: str | Path, graph: str) -> Path:
        """The file of `graph` ("prefill" / "denoise") the engine loads; ConfigError if missing."""
        name = self.files.get(graph)
        target = Path(directory) / name if name else None
        if target is None or not target.is_file():
            raise ConfigError(f"artifact {directory}: no {graph} graph file ({name or 'not in manifest'})")
        return target

    def save(self, directory: str | Path) -> Path:
        text = json.dumps(asdict(self), indent=2, sort_keys=False).encode()
        return atomic_write(Path(directory) / MANIFEST, lambda f: f.write(text))

    @classmethod
    def load(cls, directory: str | Path) -> ArtifactManifest:
        path = Path(directory) / MANIFEST
        if not path.is_file():
            raise ConfigError(f"{directory} is not an exported artifact (no {MANIFEST}); run `vlash export` first")
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: invalid JSON ({exc})") from exc
        return dataclass_from_mapping(cls, doc, str(path), "artifact manifest", ConfigError)


def is_artifact(directory: str | Path) -> bool:
    return (Path(directory) / MANIFEST).is_file()
