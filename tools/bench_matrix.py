"""Run `vlash bench` over policies x schedules and print one markdown table (for docs/BENCHMARKS.md).

    python tools/bench_matrix.py --policies pi05-tiny pi05-small --iters 20
    python tools/bench_matrix.py --policies pi05 --device cuda --dtype bf16 --cameras 1 2 --compile none reduce-overhead

Each cell is a separate `run_bench` on the same engine; medians and p99 in milliseconds.
"""

from __future__ import annotations

import argparse
import itertools
import platform

import torch

from vlash.bench import BenchSettings, run_bench
from vlash.engines import create_engine
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policies", nargs="+", default=["pi05-tiny", "pi05-small"])
    p.add_argument("--schedules", nargs="+", default=["constant", "horizon-aware"])
    p.add_argument("--cameras", nargs="+", type=int, default=[None])
    p.add_argument("--compile", nargs="+", default=["none"], help="none, default, reduce-overhead, max-autotune")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    print(
        f"<!-- torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, device {args.device}, {args.dtype} -->"
    )
    print(
        "| policy | cameras | compile | schedule | prefill p50 / p99 | step p50 / p99 | TTFA p50 / p99 "
        "| chunk p50 / p99 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for policy, cams, mode in itertools.product(args.policies, args.cameras, args.compile):
        config = load_preset(policy)
        if cams is not None:
            config = config.with_cameras(cams)
        model = build_random(config, dtype=args.dtype, device=args.device)
        engine = create_engine("torch", model=model, compile_mode=None if mode == "none" else mode)
        for schedule in args.schedules:
            settings = BenchSettings(schedule=schedule, steps=args.steps, iters=args.iters, warmup=args.warmup)
            summary = run_bench(engine, settings).summary()
            cells = [
                f"{summary[m]['median']:.1f} / {summary[m]['p99']:.1f}"
                for m in ("prefill_ms", "step_ms", "ttfa_ms", "chunk_ms")
            ]
            print(f"| {policy} | {config.num_cameras} | {mode} | {schedule} | " + " | ".join(cells) + " |", flush=True)
        del engine, model


if __name__ == "__main__":
    main()
