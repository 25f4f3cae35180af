"""Write quantized ONNX artifacts: E's engine-artifact layout (vlash.engines.artifact) with the graphs replaced by
int8 ones and the QuantManifest in `manifest.json["quantization"]`."""

from __future__ import annotations

from pathlib import Path

from vlash.atomic import staged_directory
from vlash.engines.artifact import POLICY_DIR, ArtifactManifest
from vlash.engines.onnx_export import export_onnx
from vlash.engines.tensorrt_build import QdqWriter
from vlash.errors import ConfigError
from vlash.policies.formats.loading import load_policy
from vlash.policies.quantized.manifest import QuantManifest
from vlash.policies.quantized.schemes import get_scheme
from vlash.quant.artifact import POLICY_FILES, base_info, copy_policy_files, tool_versions
from vlash.quant.calibration import FrameSpec, policy_tasks
from vlash.quant.onnx_quant import (
    DYNAMIC_WEIGHT_BITS,
    GRAPHS,
    calibration_feeds,
    quantize_dynamic,
    quantize_static,
)

ONNX_SCHEMES = ("onnx-int8-dynamic", "onnx-int8-static")


def default_calibration(metadata: dict) -> FrameSpec:
    """32 frames (8 episodes x 4) over the policy's training tasks, calibration seeds."""
    return FrameSpec(tasks=policy_tasks(metadata), episodes=8, frames_per_episode=4)


def write_qdq_graphs(
    directory: Path, manifest: ArtifactManifest, precision: str, target: Path, calibration: FrameSpec | None = None
) -> None:
    """TensorRT int8 / fp8: the artifact's graphs as QDQ graphs in `target` (a `QdqWriter` for
    vlash.engines.tensorrt_build), calibrated on simulated frames of the policy's tasks; records the frames in
    the manifest's notes."""
    policy = load_policy(directory / POLICY_DIR)
    spec = calibration or default_calibration(policy.metadata)
    feeds = calibration_feeds(policy, spec)
    for graph in GRAPHS:
        source, out = directory / manifest.onnx[graph], target / manifest.onnx[graph]
        quantize_static(source, out, graph, feeds[graph], fp8=precision == "fp8")
    manifest.notes["calibration"] = spec.describe()


def qdq_writer(calibration: FrameSpec | None = None) -> QdqWriter:
    """`write_qdq_graphs` with a chosen calibration set."""
    return lambda directory, manifest, precision, target: write_qdq_graphs(
        directory, manifest, precision, target, calibration
    )


def quantize_graphs(
    directory: Path, manifest: ArtifactManifest, scheme: str, policy_dir: Path, calibration: FrameSpec | None
) -> tuple[dict, list[str], dict | None]:
    """Replace the artifact's ONNX graphs in place by quantized ones. Returns (layers, nodes kept fp32 on purpose,
    calibration record)."""
    feeds = None
    if get_scheme(scheme).calibrated:
        policy = load_policy(policy_dir)
        spec = calibration or default_calibration(policy.metadata)
        feeds = calibration_feeds(policy, spec)
    fp8 = scheme == "trt-fp8"
    spec_of = {"dtype": "fp8", "granularity": "per-tensor"} if fp8 else {"dtype": "int8", "granularity": "per-channel"}
    if feeds is None:  # dynamic: int8 storage of 7-bit weights (vlash.quant.onnx_quant, exact on every CPU)
        spec_of["bits"] = DYNAMIC_WEIGHT_BITS
    layers: dict[str, dict] = {}
    kept: list[str] = []
    for graph in GRAPHS:
        path = directory / manifest.onnx[graph]
        source = path.with_name(f"{path.stem}.fp32.onnx")
        path.rename(source)
        if feeds is None:
            nodes, graph_kept = quantize_dynamic(source, path, graph)
            kept += [f"{graph}:{node}" for node in graph_kept]
        else:
            nodes = quantize_static(source, path, graph, feeds[graph], fp8=fp8)
        source.unlink()
        layers.update({f"{graph}:{node}": dict(spec_of) for node in nodes})
    record = None if feeds is None else spec.describe()
    return layers, kept, record


def write_onnx_artifact(
    policy_dir: str | Path, out: str | Path, scheme: str, calibration: FrameSpec | None = None, batch: int = 1
) -> ArtifactManifest:
    if scheme not in ONNX_SCHEMES:
        raise ConfigError(f"ONNX quantization scheme must be one of {ONNX_SCHEMES}, got {scheme!r}")
    src = Path(policy_dir)
    base = base_info(src)
    with staged_directory(out) as staging:
        policy_copy = staging / POLICY_DIR
        policy_copy.mkdir()
        copy_policy_files(src, policy_copy, (*POLICY_FILES, "model.safetensors"))
        model = load_policy(policy_copy).model
        manifest = export_onnx(model, staging, precision="fp32", batch=batch, policy=base["policy"])
        layers, kept, record = quantize_graphs(staging, manifest, scheme, policy_copy, calibration)
        quant = QuantManifest(
            scheme=scheme,
            engine="onnxruntime",
            base=base,
            layers=layers,
            kept=kept,
            calibration=record,
            files=dict(manifest.files),
            created_by=tool_versions(),
        )
        manifest.quantization = quant.to_dict()
        manifest.save(staging)
    return manifest
