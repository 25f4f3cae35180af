"""What skipping the VLM's last layer for the prefix saves: interleaved A/B in one process.

The action expert reads only the keys and values of each VLM layer, so the prefix's queries, attention
output and MLP in the last layer feed nothing. `Pi05Model.prefill` and the training forward skip them;
`encode_prefix` (which also returns the final-norm output, for parity checks) and `forward_joint` with
`prefix_layer=depth` (a head tapping that output) still run them — which is what both paths ran before.
Timing the two paths alternately in one process keeps this VM's drift out of the ratio.

    python tools/bench_last_layer.py [--train-steps 60] [--prefills 200] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
from abtime import interleaved, p99

from vlash.engines.base import random_inputs
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random


def row(name: str, skipped: list[float], full: list[float]) -> str:
    ratio = statistics.median(skipped) / statistics.median(full)
    return (
        f"| {name} | {statistics.median(full):.2f} / {p99(full):.2f} "
        f"| {statistics.median(skipped):.2f} / {p99(skipped):.2f} | {ratio:.3f} |"
    )


def train_step(preset: str, batch: int, prefix_layer: int | None, compile: bool = False) -> Callable[[], None]:
    """One forward_joint + backward of a random model, batch `batch` (`compile`: forward_joint torch.compiled)."""
    cfg = load_preset(preset).with_overrides(max_token_len=16)
    model = build_random(cfg, seed=0).train()
    inputs = random_inputs(cfg, batch=batch)
    gen = torch.Generator().manual_seed(0)
    x_t = torch.randn(batch, cfg.action_horizon, cfg.action_dim, generator=gen)
    tau = torch.rand(batch, cfg.action_horizon, generator=gen)
    forward = torch.compile(model.forward_joint) if compile else model.forward_joint

    def run() -> None:
        model.zero_grad(set_to_none=True)
        out = forward(inputs, x_t, tau, prefix_layer=prefix_layer)
        v = out[0] if isinstance(out, tuple) else out
        v.square().mean().backward()

    return run


def prefills(preset: str) -> tuple[Callable[[], object], Callable[[], object]]:
    """(prefill, encode_prefix) of a random model on one observation, without gradients."""
    cfg = load_preset(preset)
    model = build_random(cfg, seed=0)
    inputs = random_inputs(cfg, batch=1)
    return torch.no_grad()(lambda: model.prefill(inputs)), torch.no_grad()(lambda: model.encode_prefix(inputs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-steps", type=int, default=60, help="training steps timed per path")
    ap.add_argument("--prefills", type=int, default=200, help="pi05-tiny prefills timed per path (pi05-small: 1/10)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("| path | full layer p50 / p99 ms | skipped p50 / p99 ms | p50 ratio |")
    print("|---|---|---|---|")
    depth = load_preset("pi05-tiny-56").vlm.depth
    skipped, full = interleaved(
        train_step("pi05-tiny-56", 32, None), train_step("pi05-tiny-56", 32, depth), args.train_steps
    )
    print(row("pi05-tiny-56 training step, batch 32 (forward + backward)", skipped, full), flush=True)
    for preset, rounds in (("pi05-tiny", args.prefills), ("pi05-small", max(1, args.prefills // 10))):
        skipped, full = interleaved(*prefills(preset), rounds)
        print(row(f"{preset} prefill, batch 1", skipped, full), flush=True)


if __name__ == "__main__":
    main()
