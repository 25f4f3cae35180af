"""The server's horizon-aware early stop: chunk time with and without it, interleaved in one run.

A horizon-aware request that says how many rows the robot will run (execution_horizon) stops sampling once the
committed prefix and those rows are final (PolicyRuntime.rows_needed). This times PolicyRuntime.run on a policy
for several execution horizons, round-robin so that machine noise hits every setting alike, and checks that the
rows it returns are bit-identical to the whole chunk's.

    python tools/bench_early_stop.py --policy pi05-tiny-sim --prefix 4 --horizons 5,10,20,30 --repeats 15
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import numpy as np


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", default="pi05-tiny-sim", help="a shipped policy name or a policy directory")
    p.add_argument("--prefix", type=int, default=4, help="committed prefix rows c")
    p.add_argument("--horizons", default="5,10,20,30", help="execution horizons s (rows after the prefix)")
    p.add_argument("--repeats", type=int, default=15, help="timed runs per setting (after one warm-up each)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = p.parse_args(argv)
    import torch

    from vlash.engines import create_engine
    from vlash.policies.formats.loading import load_policy
    from vlash.policies.names.source import resolve_policy
    from vlash.runtime.loading import example_request
    from vlash.runtime.policy_runtime import PolicyRuntime

    torch.set_num_threads(args.threads)
    source = resolve_policy(args.policy)
    if source.path is None or not source.path.is_dir():
        raise SystemExit(f"--policy {args.policy!r} is {source.describe()}; give a shipped policy or a directory")
    policy = load_policy(source.path)
    runtime = PolicyRuntime(policy, create_engine("torch", model=policy.model), schedule="horizon-aware")
    prefix = np.zeros((args.prefix, runtime.action_dims), np.float32)
    base = replace(example_request(runtime, seed=1), prompt="reach the red target", prefix=prefix)
    settings = [None, *(int(s) for s in args.horizons.split(",") if s)]
    requests = {s: base if s is None else replace(base, execution_horizon=s) for s in settings}
    times: dict = {s: [] for s in settings}
    results = {s: runtime.run(r) for s, r in requests.items()}  # warm-up, and the rows to compare
    full = results[None]
    for _ in range(args.repeats):
        for s, request in requests.items():
            times[s].append(runtime.run(request).timing_ms["total_ms"])
    base_median = float(np.median(times[None]))
    print(f"{args.policy}: H = {runtime.horizon}, N = {runtime.num_steps}, prefix c = {args.prefix}, "
          f"{args.threads} thread(s), {args.repeats} interleaved runs per row")  # fmt: skip
    print("| s | rows sent | steps run | median ms | p99 ms | / whole chunk | rows equal to the whole chunk's |")
    print("|---|---|---|---|---|---|---|")
    for s in settings:
        r, t = results[s], np.asarray(times[s])
        equal = r.actions[: r.final_rows].tobytes() == full.actions[: r.final_rows].tobytes()
        print(f"| {'-' if s is None else s} | {r.final_rows} | {r.num_steps} / {runtime.num_steps} | "
              f"{np.median(t):.1f} | {np.percentile(t, 99):.1f} | {np.median(t) / base_median:.2f} | "
              f"{'bit-identical' if equal else 'DIFFERENT'} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
