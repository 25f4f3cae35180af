"""`vlash export`: write an engine artifact (ONNX graphs, TensorRT engines) that `vlash serve --engine` loads."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from vlash.errors import ConfigError

HELP = "export a policy to an engine artifact (ONNX Runtime graphs, TensorRT engines)"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help=HELP)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--policy", help="shipped policy name (checkpoints/<name>), or a preset with --random-weights")
    src.add_argument("--checkpoint", type=Path, help="vlash policy directory")
    p.add_argument("--random-weights", action="store_true", help="--policy names a preset: random weights")
    p.add_argument("--engine", choices=("onnxruntime", "tensorrt"), default="onnxruntime")
    p.add_argument("--precision", default="fp32", help="onnxruntime: fp32 or fp16; tensorrt: what its builder takes")
    p.add_argument("--batch", type=int, default=1, help="static batch size of the graphs")
    p.add_argument("--out", type=Path, required=True, help="artifact directory (replaced atomically when complete)")


def run(args: argparse.Namespace) -> int:
    from vlash.engines.export import export_artifact  # torch + onnx: imported only when the command runs
    from vlash.policies.shipped import shipped_policy_dir

    if args.random_weights and args.policy is None:
        raise ConfigError("--random-weights needs --policy PRESET (e.g. pi05-tiny), not --checkpoint")
    if args.random_weights:
        source = {"preset": args.policy}
    else:
        source = {"checkpoint": shipped_policy_dir(args.policy) if args.policy else args.checkpoint}
    qdq = None
    if args.engine == "tensorrt" and args.precision in ("int8", "fp8"):  # calibrated on simulated frames
        from vlash.quant.onnx_artifact import qdq_writer

        qdq = qdq_writer()
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("export", total=1.0)
        manifest = export_artifact(
            args.out,
            engine=args.engine,
            precision=args.precision,
            batch=args.batch,
            model_id=args.policy or "",
            progress=lambda fraction, label: bar.update(task, completed=fraction, description=label),
            qdq_graphs=qdq,
            **source,
        )
    files = ", ".join(sorted(set(manifest.files.values()) | set(manifest.onnx.values())))
    print(
        f"vlash export: {manifest.policy} -> {args.out} (engine={manifest.engine} precision={manifest.precision} "
        f"batch={manifest.batch} opset={manifest.opset}; {files})"
    )
    return 0
