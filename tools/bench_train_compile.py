"""What `vlash train --compile` buys: a pi05-tiny-56 training step (forward_joint + backward, batch 32), eager
against torch.compile'd, interleaved in one process; and the one-off compile time of the first step (inductor
caches compiled kernels on disk: run it twice to see the cached time too).

    python tools/bench_train_compile.py [--steps 40] [--threads 2] [--prefix-layer 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from abtime import interleaved, p99
from bench_last_layer import train_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="training steps timed per path")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefix-layer", type=int, default=2, help="tap the VLM stream here, as the target heads do")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    eager = train_step("pi05-tiny-56", 32, args.prefix_layer)
    compiled = train_step("pi05-tiny-56", 32, args.prefix_layer, compile=True)
    start = time.perf_counter()
    compiled()
    print(f"first compiled step (compiles forward and backward): {time.perf_counter() - start:.1f} s")
    fast, slow = interleaved(compiled, eager, args.steps)
    print("| training step, pi05-tiny-56, batch 32 | eager p50 / p99 ms | compiled p50 / p99 ms | p50 ratio |")
    print("|---|---|---|---|")
    ratio = statistics.median(fast) / statistics.median(slow)
    print(
        f"| forward_joint + backward | {statistics.median(slow):.1f} / {p99(slow):.1f} "
        f"| {statistics.median(fast):.1f} / {p99(fast):.1f} | {ratio:.3f} |"
    )


if __name__ == "__main__":
    main()
