"""The quantization manifest (`quant.json`): what a quantized artifact holds and how to load it.

The scheme lives here, never in a file name. Format "vlash.quant/1":
    format       "vlash.quant/1"
    scheme       one of vlash.policies.quantized.schemes.SCHEMES, e.g. "torch-int8"
    engine       the engine that runs the artifact: "torch" | "onnxruntime" | "tensorrt"
    base         {"policy": config name, "model_sha256": hash of the fp32 source weights, "source": path}
    layers       module (torch) or MatMul node (ONNX) name -> {"dtype": "int8" | "int4" | "fp8",
                 "granularity": "per-channel" | "group" | "per-tensor", "group_size": int (int4 only),
                 "bits": int (fewer than the dtype holds: onnx-int8-dynamic's 7-bit weights)}
    kept         modules (or ONNX MatMul nodes) deliberately left in the compute dtype (action-expert attention,
                 time MLP, the VLM's MLP down projections under onnx-int8-dynamic...)
    calibration  None, or {"source": "vlash.sim", "tasks": [...], "seeds": [...], "frames": n}
    files        role -> file name inside the artifact (e.g. {"model": "model.safetensors"})
    fidelity     None (never checked), or the last `--check` result: {"passed", "reasons", "actions": {...},
                 "rollout", "reference_rollout", "thresholds": {...}, "host": {...}}; vlash.policies.quantized.gate
                 reads it, and serving or benchmarking a failed artifact needs --allow-failed-gate
    created_by   {"vlash": version, "torch": version, "onnxruntime": version, ...}
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vlash.dataclass_io import dataclass_from_mapping
from vlash.errors import CheckpointError

FORMAT = "vlash.quant/1"
MANIFEST_NAME = "quant.json"
ENGINES = ("torch", "onnxruntime", "tensorrt")
LAYER_DTYPES = ("int8", "int4", "fp8")


@dataclass
class QuantManifest:
    scheme: str  # a schemes.SCHEMES name, e.g. "torch-int8"
    engine: str  # engine that runs the artifact
    base: dict[str, Any]  # {"policy", "model_sha256", "source"}
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)  # module -> {"dtype", "granularity", ...}
    kept: list[str] = field(default_factory=list)  # modules kept in the compute dtype on purpose
    calibration: dict[str, Any] | None = None  # sim frames used for calibration (static schemes)
    files: dict[str, str] = field(default_factory=dict)  # role -> file name in the artifact
    fidelity: dict[str, Any] | None = None  # last --check result
    created_by: dict[str, str] = field(default_factory=dict)  # tool versions
    format: str = FORMAT

    def __post_init__(self) -> None:
        # extra: server; late: keeps the manifest importable on its own
        from vlash.policies.quantized.schemes import SCHEMES

        if self.format != FORMAT:
            raise CheckpointError(f"quant manifest format is {self.format!r}, this vlash reads {FORMAT!r}")
        if self.scheme not in SCHEMES:
            raise CheckpointError(f"quant manifest scheme {self.scheme!r} unknown; known: {', '.join(SCHEMES)}")
        if self.engine not in ENGINES:
            raise CheckpointError(f"quant manifest engine {self.engine!r} unknown; known: {', '.join(ENGINES)}")
        for name, spec in self.layers.items():
            if spec.get("dtype") not in LAYER_DTYPES:
                raise CheckpointError(
                    f"quant manifest layer {name!r}: dtype must be one of {LAYER_DTYPES}, got {spec!r}"
                )
            if spec["dtype"] == "int4" and not isinstance(spec.get("group_size"), int):
                raise CheckpointError(f"quant manifest layer {name!r}: int4 needs an integer group_size, got {spec!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, directory: str | Path) -> Path:
        path = Path(directory) / MANIFEST_NAME
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")
        return path

    @classmethod
    def from_dict(cls, data: Any, source: str = "quant manifest") -> QuantManifest:
        return dataclass_from_mapping(cls, data, source, "quant manifest", CheckpointError)

    @classmethod
    def read(cls, directory: str | Path) -> QuantManifest:
        path = Path(directory) / MANIFEST_NAME
        if not path.is_file():
            raise CheckpointError(f"{directory} is not a quantized artifact (no {MANIFEST_NAME})")
        try:
            return cls.from_dict(json.loads(path.read_text()), str(path))
        except json.JSONDecodeError as exc:
            raise CheckpointError(f"{path} is not valid JSON: {exc}") from exc


def is_quantized(directory: str | Path) -> bool:
    return (Path(directory) / MANIFEST_NAME).is_file()
