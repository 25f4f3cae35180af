"""How a batch of B requests scales on this machine: `PolicyRuntime.run_batch` of B = 1, 2, 4 requests, the sizes
interleaved round by round; median and max batch time, and chunks/s relative to B = 1.

    python tools/bench_batch_scaling.py --policy pi05-small --rounds 3 --threads 2
    python tools/bench_batch_scaling.py --policy pi05 --device cuda --dtype bf16 --sizes 1 2 4 8 --rounds 5

Random weights of the named preset; the requests are `example_request`s with distinct seeds. On a GPU the batch
time ends when its actions are on the host (run_batch returns them as arrays), so no extra synchronize is needed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from vlash.runtime.loading import example_request, load_runtime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="pi05-tiny", help="shipped preset (random weights)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4], help="batch sizes (the first is the base)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of every size, interleaved")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    parser.add_argument("--dtype", default=None, help="fp32, bf16, ... (default: bf16 on a GPU, fp32 on the CPU)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or min(args.sizes) < 1:
        parser.error("--rounds and --sizes must be >= 1")
    torch.set_num_threads(args.threads)
    runtime = load_runtime(policy=args.policy, random_weights=True, device=args.device, dtype=args.dtype).runtime
    requests = [example_request(runtime, seed=i) for i in range(max(args.sizes))]
    runtime.run_batch(requests[:2])  # warm-up
    times: dict[int, list[float]] = {b: [] for b in args.sizes}
    for r in range(args.rounds):
        for b in args.sizes:
            start = time.perf_counter()
            outcomes = runtime.run_batch(requests[:b])
            times[b].append(time.perf_counter() - start)
            failed = [o for o in outcomes if isinstance(o, Exception)]
            if failed:
                raise SystemExit(f"batch of {b} failed: {failed[0]!r}")
        print(f"bench_batch_scaling: round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    base = statistics.median(times[args.sizes[0]]) / args.sizes[0]
    print(f"<!-- {args.policy}, {args.device}, {args.dtype or 'default dtype'}, torch {torch.__version__} -->")
    print(f"| {args.policy} B | batch median ms | max ms | per request ms | chunks/s | vs B = {args.sizes[0]} |")
    print("|---|---|---|---|---|---|")
    for b in args.sizes:
        median = statistics.median(times[b])
        print(
            f"| {b} | {median * 1e3:.0f} | {max(times[b]) * 1e3:.0f} | {median / b * 1e3:.0f} | {b / median:.2f} | "
            f"{base / (median / b):.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
