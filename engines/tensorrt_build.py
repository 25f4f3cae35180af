"""TensorRT engine builds from an exported artifact's ONNX graphs (`vlash export --engine tensorrt`).

Works with `tensorrt` (JetPack, x86 TensorRT 10) and `tensorrt_rtx` (RTX GPUs; builds ahead of time on a
machine without a GPU for a chosen compute capability). Precision:
    fp32 / fp16 / bf16  classic TensorRT: builder flags on the fp32 graph. TensorRT-RTX networks are strongly
                        typed, so fp16 there builds from an fp16 ONNX export; bf16 needs classic TensorRT.
    int8 / fp8          explicit quantization: QDQ graphs from quant.onnx_quant, calibrated on simulated frames
                        rendered by vlash.sim with the policy's prompts (never random data).
Plans are cached (vlash.engines.tensorrt_cache) by model hash, precision, TensorRT version and GPU / target.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType

from vlash.engines.artifact import POLICY_DIR, ArtifactManifest
from vlash.engines.tensorrt_cache import EngineCache, cache_key, target_name
from vlash.engines.tensorrt_targets import aot_targets
from vlash.errors import ConfigError, EngineUnavailable

log = logging.getLogger(__name__)
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8")
GRAPHS = ("prefill", "denoise")
Progress = Callable[[float, str], None]
# (artifact directory, its manifest, "int8" | "fp8", target directory): write QDQ prefill/denoise graphs under the
# manifest's ONNX names into the target directory (vlash.quant.onnx_artifact.write_qdq_graphs).
QdqWriter = Callable[[Path, ArtifactManifest, str, Path], None]


def import_tensorrt() -> ModuleType:
    """`tensorrt` if installed, else `tensorrt_rtx`; EngineUnavailable naming both installs otherwise."""
    for name in ("tensorrt", "tensorrt_rtx"):
        try:
            return __import__(name)
        except ImportError:
            continue
    raise EngineUnavailable(
        "TensorRT is not installed: `pip install vlash[trt]` (TensorRT-RTX, RTX GPUs) or use JetPack's / "
        "NVIDIA's `tensorrt` package (Jetson, data-center GPUs)"
    )


def is_rtx(trt: ModuleType) -> bool:
    return trt.__name__ == "tensorrt_rtx"


def check_precision(trt: ModuleType, precision: str) -> None:
    if precision not in PRECISIONS:
        raise ConfigError(f"TensorRT precision must be one of {PRECISIONS}, got {precision!r}")
    if is_rtx(trt) and precision == "bf16":
        raise ConfigError("bf16 needs classic TensorRT (builder flag); TensorRT-RTX builds fp16, fp8 or int8 here")


def configure(trt: ModuleType, builder, precision: str, compute_capability: str | None, workspace_gb: float):
    """Builder config: memory pool, precision flags (classic TRT only), ahead-of-time target (RTX only)."""
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_gb * (1 << 30)))
    if not is_rtx(trt):
        flags = {"fp16": ["FP16"], "bf16": ["BF16"], "int8": ["INT8", "FP16"], "fp8": ["FP8", "FP16"]}
        for flag in flags.get(precision, []):
            if hasattr(trt.BuilderFlag, flag):  # explicit QDQ needs no INT8 calibrator; the flags allow the kernels
                config.set_flag(getattr(trt.BuilderFlag, flag))
    if compute_capability is not None:
        if not hasattr(config, "set_compute_capability"):
            raise ConfigError("ahead-of-time compute capability targets need tensorrt_rtx (`pip install vlash[trt]`)")
        try:
            target = getattr(trt.ComputeCapability, compute_capability.upper())
        except AttributeError:
            known = [m for m in trt.ComputeCapability.__members__ if m.startswith("SM")]
            raise ConfigError(
                f"compute capability {compute_capability!r} unknown to TensorRT-RTX; known: {known}"
            ) from None
        config.num_compute_capabilities = 1
        config.set_compute_capability(target, 0)
    return config


def build_engine(
    onnx_path: str | Path,
    precision: str,
    compute_capability: str | None = None,
    workspace_gb: float = 4.0,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> bytes:
    """Parse one ONNX graph and build a serialized engine (plan). shapes: the full shape of every input (the
    manifest's tensor specs); an input the ONNX leaves free (tau's time axis) is pinned to it by an optimization
    profile, so the plan runs one shape (the engine broadcasts a shared time into its [B, H] buffer)."""
    trt = import_tensorrt()
    check_precision(trt, precision)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # QDQ graphs keep their Q/DQ precisions; flags choose the rest
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise EngineUnavailable(f"TensorRT cannot parse {onnx_path}: {errors}")
    config = configure(trt, builder, precision, compute_capability, workspace_gb)
    pin_free_inputs(builder, network, config, shapes or {}, onnx_path)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise EngineUnavailable(f"TensorRT failed to build {onnx_path} at {precision} (see the TensorRT log above)")
    return bytes(plan)


def pin_free_inputs(builder, network, config, shapes: Mapping[str, Sequence[int]], onnx_path: str | Path) -> None:
    """One optimization profile with min = opt = max = `shapes[name]` for every network input with a free (-1) dim."""
    free = [network.get_input(i) for i in range(network.num_inputs) if -1 in tuple(network.get_input(i).shape)]
    if not free:
        return
    profile = builder.create_optimization_profile()
    for tensor in free:
        if tensor.name not in shapes:
            raise ConfigError(f"{onnx_path}: input {tensor.name!r} has a free dimension and no shape was given for it")
        shape = tuple(int(d) for d in shapes[tensor.name])
        profile.set_shape(tensor.name, shape, shape, shape)
    config.add_optimization_profile(profile)


def graph_sources(
    directory: Path, manifest: ArtifactManifest, precision: str, trt: ModuleType, qdq_graphs: QdqWriter | None = None
) -> dict[str, Path]:
    """The ONNX graph each plan is built from: the export itself, an fp16 re-export (RTX), or QDQ graphs."""
    directory = Path(directory)
    if precision in ("int8", "fp8") or (precision == "fp16" and is_rtx(trt)):
        target = directory / f"onnx_{precision}"
        if not all((target / manifest.onnx[g]).is_file() for g in GRAPHS):
            write_precision_graphs(directory, manifest, precision, target, qdq_graphs)
        return {g: target / manifest.onnx[g] for g in GRAPHS}
    return {g: directory / manifest.onnx[g] for g in GRAPHS}


def write_precision_graphs(
    directory: Path, manifest: ArtifactManifest, precision: str, target: Path, qdq_graphs: QdqWriter | None = None
) -> None:
    """fp16: re-export the policy at fp16; int8 / fp8: the QDQ graphs `qdq_graphs` writes."""
    if precision in ("int8", "fp8"):
        if qdq_graphs is None:
            raise ConfigError(
                f"{precision} TensorRT engines are built from calibrated QDQ graphs: "
                f"`vlash quantize --scheme trt-{precision}` (or pass vlash.quant's write_qdq_graphs)"
            )
        target.mkdir(parents=True, exist_ok=True)
        qdq_graphs(directory, manifest, precision, target)
        return
    from vlash.engines.onnx_export import export_onnx  # extra: onnx
    from vlash.policies.formats.loading import load_policy  # extra: server

    policy = load_policy(directory / POLICY_DIR)
    target.mkdir(parents=True, exist_ok=True)
    export_onnx(policy.model, target, precision="fp16", batch=manifest.batch, policy=manifest.policy)
    (target / "manifest.json").unlink(missing_ok=True)


def build_plans(
    directory: str | Path,
    manifest: ArtifactManifest,
    precision: str,
    progress: Progress | None = None,
    compute_capability: str | None = None,
    cache: EngineCache | None = None,
    qdq_graphs: QdqWriter | None = None,
) -> None:
    """Build prefill.plan and denoise.plan next to the ONNX graphs; updates `manifest` (the caller saves it)."""
    trt = import_tensorrt()
    check_precision(trt, precision)
    report = progress or (lambda fraction, label: None)
    cache = cache or EngineCache()
    directory = Path(directory)
    report(0.0, f"preparing {precision} graphs")
    sources = graph_sources(directory, manifest, precision, trt, qdq_graphs)
    keys = {}
    shapes = {name: spec["shape"] for name, spec in manifest.tensors.items()}
    for i, graph in enumerate(GRAPHS):
        report(0.2 + 0.4 * i, f"building the {graph} engine ({precision})")
        key = cache_key(sources[graph], precision, trt.__version__, target_name(compute_capability))
        plan = cache.get_or_build(
            key, lambda g=graph: build_engine(sources[g], precision, compute_capability, shapes=shapes)
        )
        (directory / f"{graph}.plan").write_bytes(plan)
        keys[graph] = key
    manifest.engine = "tensorrt"
    manifest.precision = precision
    manifest.files = {g: f"{g}.plan" for g in GRAPHS}
    manifest.notes["tensorrt"] = {
        "module": trt.__name__,
        "version": trt.__version__,
        "target": target_name(compute_capability),
        "gpus": aot_targets(trt, compute_capability) if is_rtx(trt) else [target_name()],  # what the plans run on
        "built_on": target_name(),  # this machine's GPU, or "no-gpu": whether it could load them
        "sources": {g: str(sources[g].relative_to(directory)) for g in GRAPHS},
        "cache_keys": keys,
    }
    report(1.0, f"{trt.__name__} plans built for {', '.join(manifest.notes['tensorrt']['gpus'])}")
