"""`vlash export`: write an engine artifact (ONNX graphs, TensorRT engines) that `vlash serve --engine` loads."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from vlash.cli.command import Command
from vlash.cli.flags import ConfigFlags
from vlash.cli.policy_args import POLICY_OR_CHECKPOINT, policy_flags, policy_source
from vlash.cli.preflight import check_output_dir, overwrite_flags, positive_int
from vlash.errors import ConfigError
from vlash.output_kinds import OutputKind
from vlash.policies.names.source import PolicyKind, PolicySource
from vlash.progress import progress

HELP = "export a policy to an engine artifact (ONNX Runtime graphs, TensorRT engines)"
ACCEPTED = {PolicyKind.SHIPPED: "", PolicyKind.DIRECTORY: "vlash layout", PolicyKind.PRESET: "with --random-weights"}


@dataclass(frozen=True)
class ExportOptions:
    """The artifact to write."""

    out: Path  # artifact directory (new or empty; written atomically)
    engine: str = field(default="onnxruntime", metadata={"choices": ("onnxruntime", "tensorrt")})  # its engine
    precision: str = "fp32"  # onnxruntime: fp32 or fp16; tensorrt: what its builder takes
    batch: int = field(default=1, metadata={"parse": positive_int})  # static batch size of the graphs


COMMAND = Command(
    "export",
    HELP,
    "Export a policy to an engine artifact that `vlash serve --engine` and `vlash bench --artifact` load.",
    (
        policy_flags("the policy to export", ACCEPTED, checkpoint=True, random_weights=True),
        ConfigFlags(ExportOptions, title="artifact"),
        overwrite_flags(OutputKind.ENGINE_ARTIFACT, title="artifact"),
    ),
    exclusive=POLICY_OR_CHECKPOINT,
    required_one_of=POLICY_OR_CHECKPOINT,
)


def export_source(args: argparse.Namespace) -> PolicySource:
    """The policy to export, and every other flag checked (nothing loaded yet)."""
    source = policy_source(args, "export", ACCEPTED)
    if source.kind is PolicyKind.DIRECTORY and source.layout != "vlash":
        raise ConfigError(
            f"{source.value} is {source.describe()}: `vlash convert --from {source.layout} {source.value} --out DIR` "
            "first, then export DIR"
        )
    check_output_dir(args.out, "--out", OutputKind.ENGINE_ARTIFACT, args.overwrite)
    if args.engine == "onnxruntime":
        from vlash.engines.artifact import PRECISIONS  # extra: server
    else:
        from vlash.engines.tensorrt_build import PRECISIONS  # extra: trt
    if args.precision not in PRECISIONS:
        raise ConfigError(
            f"--engine {args.engine} precision must be one of {', '.join(PRECISIONS)}, got {args.precision!r}"
        )
    return source


def run(args: argparse.Namespace) -> int:
    source = export_source(args)
    from vlash.engines.export import export_artifact  # extra: onnx; torch + onnx: imported only when the command runs

    where = {"preset": source.value} if source.kind is PolicyKind.PRESET else {"checkpoint": source.path}
    qdq = None
    if args.engine == "tensorrt" and args.precision in ("int8", "fp8"):  # calibrated on simulated frames
        from vlash.quant.onnx_artifact import qdq_writer  # extra: onnx

        qdq = qdq_writer()
    with progress("vlash export:", 1.0, counted=False, transient=True) as update:
        manifest = export_artifact(
            args.out,
            engine=args.engine,
            precision=args.precision,
            batch=args.batch,
            model_id=source.name,
            progress=lambda fraction, label: update(fraction, label),
            qdq_graphs=qdq,
            **where,
        )
    files = ", ".join(sorted(set(manifest.files.values()) | set(manifest.onnx.values())))
    print(
        f"vlash export: {manifest.policy} -> {args.out} (engine={manifest.engine} precision={manifest.precision} "
        f"batch={manifest.batch} opset={manifest.opset}; {files})"
    )
    if manifest.engine == "tensorrt":  # which GPUs the plans run on, and whether this machine is one of them
        from vlash.engines.tensorrt_targets import describe_build  # extra: server (no TensorRT import)

        for line in describe_build(manifest.notes.get("tensorrt", {})):
            print(f"vlash export: {line}")
    return 0
