"""The shared-time path measured: one denoise step with tau per token [B, H] vs one time per row [B, 1] (what the
sampler passes at every step of the constant schedule), interleaved in one process, per engine. Prints one
markdown table: step p50 / p99 of each and the per-round ratio (median, min-max).

    python tools/bench_shared_time.py --policy pi05-small --cameras 1 --prompt-len 64 --threads 2 --rounds 30
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from abtime import interleaved, p99

from vlash.bench import make_engine
from vlash.cli.bench_config_args import add_config_arguments, config_from_args
from vlash.engines.base import Engine
from vlash.policies.pi05.examples import random_inputs


def step_pair(engine: Engine, rounds: int) -> tuple[list[float], list[float]]:
    """Per-call ms of one denoise step with tau [1, H] and with tau [1, 1] (same x, cache and time)."""
    cfg = engine.config
    with torch.no_grad():
        cache = engine.prefill(random_inputs(cfg, seed=0, device=engine.device))
        x = torch.randn(1, cfg.action_horizon, cfg.action_dim, device=engine.device)
        shared = torch.full((1, 1), 0.7, device=engine.device)
        per_token = shared.expand(1, cfg.action_horizon).contiguous()
        return interleaved(
            lambda: engine.denoise_step(x, per_token, cache), lambda: engine.denoise_step(x, shared, cache), rounds
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_arguments(p)
    p.add_argument("--engines", nargs="+", default=["torch", "onnxruntime"], choices=["torch", "onnxruntime"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    config = config_from_args(p, args)
    print(
        f"<!-- torch {torch.__version__}, {platform.processor() or platform.machine()}, {args.threads} threads, "
        f"{config.name} ({config.num_cameras} camera(s), prompt {config.max_token_len}), {args.rounds} rounds -->"
    )
    print("| engine | per-token tau step p50 / p99 ms | shared tau step p50 / p99 ms | shared / per-token (min-max) |")
    print("|---|---|---|---|")
    device = torch.device("cpu")
    with tempfile.TemporaryDirectory(prefix="vlash-shared-time-") as tmp:
        for name in args.engines:
            print(f"building {name} ...", file=sys.stderr, flush=True)
            engine = make_engine(config, name, "fp32", device, threads=args.threads, workdir=Path(tmp))
            engine.warmup()
            per_token, shared = step_pair(engine, args.rounds)
            ratios = [s / t for s, t in zip(shared, per_token, strict=True)]
            print(
                f"| {name} | {statistics.median(per_token):.1f} / {p99(per_token):.1f} "
                f"| {statistics.median(shared):.1f} / {p99(shared):.1f} "
                f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
