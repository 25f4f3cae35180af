"""One entry point per phase: `quantize` (offline, any scheme) and `open_quantized` (an engine over an artifact)."""

from __future__ import annotations

import contextlib
import json
import platform
from pathlib import Path
from typing import Any

from vlash.engines.artifact import MANIFEST, POLICY_DIR, ArtifactManifest
from vlash.engines.base import Engine, create_engine
from vlash.errors import CheckpointError
from vlash.policies.formats.base import LoadedPolicy
from vlash.policies.formats.loading import load_policy
from vlash.policies.quantized.manifest import QuantManifest, is_quantized
from vlash.policies.quantized.schemes import get_scheme
from vlash.quant.artifact import tool_versions
from vlash.quant.calibration import FrameSpec
from vlash.quant.torch_quant import DEFAULT_GROUP_SIZE


def quantize(
    policy_dir: str | Path,
    out: str | Path,
    scheme: str,
    group_size: int = DEFAULT_GROUP_SIZE,
    calibration: FrameSpec | None = None,
) -> Path:
    """Quantize an fp32 vlash policy directory into `out` (replaced atomically) with `scheme`."""
    engine = get_scheme(scheme).engine
    if engine == "torch":
        from vlash.quant.artifact import write_torch_artifact  # extra: server

        write_torch_artifact(policy_dir, out, scheme, group_size)
    elif engine == "onnxruntime":
        from vlash.quant.onnx_artifact import write_onnx_artifact  # extra: onnx

        write_onnx_artifact(policy_dir, out, scheme, calibration)
    else:  # TensorRT: the exporter + vlash.engines.tensorrt_build, with QDQ graphs calibrated here on sim frames
        from vlash.engines.export import export_artifact  # extra: onnx
        from vlash.quant.onnx_artifact import qdq_writer  # extra: onnx

        precision = scheme.removeprefix("trt-")
        export_artifact(
            out, engine="tensorrt", precision=precision, checkpoint=policy_dir, qdq_graphs=qdq_writer(calibration)
        )
    return Path(out)


def open_quantized(artifact: str | Path, threads: int | None = None) -> tuple[Engine, LoadedPolicy, str]:
    """(engine, policy with its processor, scheme) of a quantized artifact, torch or engine-artifact layout."""
    path = Path(artifact)
    if is_quantized(path):
        policy = load_policy(path)
        return create_engine("torch", model=policy.model), policy, QuantManifest.read(path).scheme
    if (path / MANIFEST).is_file():
        manifest = ArtifactManifest.load(path)
        scheme = (manifest.quantization or {}).get("scheme", f"{manifest.engine}-{manifest.precision}")
        engine = create_engine(manifest.engine, artifact=path, threads=threads)
        return engine, load_policy(path / POLICY_DIR), scheme
    raise CheckpointError(f"{path} is neither a quantized policy directory nor an engine artifact")


def measuring_host() -> dict[str, str]:
    """The machine a --check ran on: int8 kernels differ by CPU (vlash.quant.onnx_quant), so a verdict names it."""
    host = {"machine": platform.machine(), "cpu": platform.processor() or "unknown"}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                host["cpu"] = line.partition(":")[2].strip()
                break
    return {**host, **{k: v for k, v in tool_versions().items() if k.startswith("onnxruntime")}}


def record_fidelity(artifact: str | Path, result: dict[str, Any]) -> None:
    """Store a --check result, with the host it was measured on, in the artifact's manifest (quant.json, or
    manifest.json["quantization"])."""
    path = Path(artifact)
    result = {**result, "host": measuring_host()}
    if is_quantized(path):
        manifest = QuantManifest.read(path)
        manifest.fidelity = result
        manifest.write(path)
        return
    doc = json.loads((path / MANIFEST).read_text())
    if doc.get("quantization") is None:
        doc["quantization"] = {"fidelity": result}
    else:
        doc["quantization"]["fidelity"] = result
    (path / MANIFEST).write_text(json.dumps(doc, indent=2) + "\n")
