"""`vlash export`: a policy -> a complete engine artifact directory, written atomically.

The directory holds the policy itself (`policy/`, for the server's pre/post-processing), the ONNX graphs and
the manifest; for `--engine tensorrt` the TensorRT builder (`vlash.engines.tensorrt_build.build_plans`) then adds
its engine files next to the ONNX graphs and records them in the manifest.
"""

from __future__ import annotations

import importlib
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from vlash.atomic import FILE_LIST, staged_directory
from vlash.engines.artifact import POLICY_DIR, ArtifactManifest
from vlash.engines.onnx_export import Progress, export_onnx
from vlash.errors import ConfigError, EngineUnavailable
from vlash.policies.formats.loading import load_policy
from vlash.policies.formats.random_policy import write_random_policy
from vlash.policies.pi05 import load_preset

if TYPE_CHECKING:
    from vlash.engines.tensorrt_build import QdqWriter

EXPORT_ENGINES = ("onnxruntime", "tensorrt")
TENSORRT_BUILDER = "vlash.engines.tensorrt_build"  # build_plans(directory, manifest, precision, progress)

log = logging.getLogger(__name__)


def _tensorrt_builder():
    try:
        module = importlib.import_module(TENSORRT_BUILDER)
    except ImportError as exc:
        raise EngineUnavailable(
            f"--engine tensorrt is not available here ({exc}); install TensorRT (`pip install vlash[trt]`) "
            "on the target device, or export --engine onnxruntime"
        ) from exc
    return module.build_plans


def _copy_policy(source: Path, target: Path) -> None:
    """A vlash policy directory, as is (LeRobot directories are read and re-saved by the caller), but its list of
    files: the artifact's own FILE_LIST lists them."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*", FILE_LIST))


def export_artifact(
    out: str | Path,
    engine: str = "onnxruntime",
    precision: str = "fp32",
    checkpoint: str | Path | None = None,
    preset: str | None = None,
    batch: int = 1,
    model_id: str = "",
    progress: Progress | None = None,
    qdq_graphs: QdqWriter | None = None,
) -> ArtifactManifest:
    """Export a policy directory (`checkpoint`) or a preset with random weights (`preset`) to `out`. TensorRT
    int8 / fp8 builds need `qdq_graphs` (vlash.quant.onnx_artifact.write_qdq_graphs) to calibrate their graphs."""
    if engine not in EXPORT_ENGINES:
        raise ConfigError(f"export engine must be one of {EXPORT_ENGINES}, got {engine!r}")
    if (checkpoint is None) == (preset is None):
        raise ConfigError("export needs exactly one of a policy directory and a preset (random weights)")
    build_plans = _tensorrt_builder() if engine == "tensorrt" else None  # fail before any work
    if build_plans is not None and precision in ("int8", "fp8") and qdq_graphs is None:
        raise ConfigError(
            f"TensorRT {precision} needs calibrated QDQ graphs: `vlash quantize --scheme trt-{precision}`"
        )
    report = progress or (lambda fraction, label: None)
    with staged_directory(out) as staging:
        report(0.0, "copying the policy")
        policy_dir = staging / POLICY_DIR
        if preset is not None:
            load_preset(preset)  # ConfigError naming the presets
            write_random_policy(policy_dir, preset)
        elif (Path(checkpoint) / "config.yaml").is_file():
            _copy_policy(Path(checkpoint), policy_dir)
        else:
            raise ConfigError(
                f"{checkpoint}: not a vlash policy directory (no config.yaml); LeRobot and openpi checkpoints: "
                "`vlash convert --from lerobot|openpi|openpi-jax SRC --out DIR` first, then export DIR"
            )
        model = load_policy(policy_dir).model
        if build_plans is not None and model.config.time_embedding == "fp64":  # TensorRT has no float64
            log.warning("TensorRT has no float64: the time embedding of this LeRobot policy runs in fp32 (~1e-4)")
            model.config = model.config.with_overrides(time_embedding="fp32")  # the manifest records it
        manifest = export_onnx(
            model,
            staging,
            precision=precision if engine == "onnxruntime" else "fp32",  # TensorRT lowers precision itself
            batch=batch,
            progress=lambda f, label: report(0.05 + 0.75 * f if build_plans else 0.05 + 0.95 * f, label),
            policy=model_id or (preset or Path(checkpoint).resolve().name),
        )
        if build_plans is not None:
            build_plans(
                staging, manifest, precision, lambda f, label: report(0.8 + 0.2 * f, label), qdq_graphs=qdq_graphs
            )
            manifest.save(staging)
        report(1.0, "done")
    return manifest
