"""What serving costs: the same policy's chunk in process (`PolicyRuntime.run`) and served (`vlash serve` in its
own process, `PolicyClient.infer` over loopback tcp), interleaved request by request with the same request, seed
and thread count, so only one of them computes at a time and the machine's drift falls on both alike.

Also prints the server's own breakdown (queue, preprocess, prefill, denoise steps, postprocess) of the served
requests, so a gap can be attributed: transport + codec = served - server_ms.

    python tools/bench_serving_overhead.py --policy pi05-tiny-sim --threads 1 2 --requests 60 [--json out.json]

The server is `vlash serve` as `vlash demo` starts it (vlash.demo.server_process: its own warm-up on the model
thread); both sides then run --warmup untimed requests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from robot_io.client import PolicyClient
from robot_io.protocol import Infer
from vlash.atomic import atomic_write
from vlash.cli.preflight import check_output_file, non_negative_int, positive_int
from vlash.demo.server_process import ServerProcess
from vlash.errors import ConfigError, VlashError

PROMPT = "touch the red target"
BREAKDOWN = ("queue_ms", "preprocess_ms", "prefill_ms", "postprocess_ms", "server_ms")


def _stats(values: list[float]) -> dict[str, float]:
    a = np.asarray(values)
    return {"p50": float(np.median(a)), "p99": float(np.percentile(a, 99)), "mean": float(a.mean())}


def measure(policy: str, threads: int, requests: int, warmup: int) -> dict:
    """One interleaved run at `threads` torch threads in both processes."""
    import torch

    from vlash.runtime.loading import load_runtime
    from vlash.runtime.request import make_infer

    torch.set_num_threads(threads)
    runtime = load_runtime(policy).runtime
    size = runtime.config.vision.image_size
    cameras = runtime.config.camera_names
    rng = np.random.default_rng(0)
    local, served, breakdown = [], [], []
    server = ServerProcess(["--policy", policy, "--device", "cpu", "--threads", str(threads)])
    with server, PolicyClient(server.start(), timeout_s=60.0) as client:
        client.connect()
        for i in range(warmup + requests):
            images = {c: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in cameras}
            state = rng.uniform(-1, 1, runtime.state_dims).astype(np.float32)
            start = time.perf_counter()
            runtime.run(make_infer(images, state, PROMPT, seed=i))
            local_ms = (time.perf_counter() - start) * 1e3
            start = time.perf_counter()
            reply = client.infer(Infer(i, i, time.time_ns(), PROMPT, images, state, seed=i))
            served_ms = (time.perf_counter() - start) * 1e3
            if i >= warmup:
                local.append(local_ms)
                served.append(served_ms)
                steps = sum(v for k, v in reply.timing_ms.items() if k.startswith("step_"))
                breakdown.append({**{k: reply.timing_ms.get(k, 0.0) for k in BREAKDOWN}, "steps_ms": steps})
            print(f"threads {threads}: {i + 1}/{warmup + requests}", file=sys.stderr, flush=True)
    parts = {k: float(np.median([b[k] for b in breakdown])) for k in (*BREAKDOWN, "steps_ms")}
    return {"threads": threads, "in_process": _stats(local), "served": _stats(served), "server_breakdown_p50": parts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="pi05-tiny-sim", help="a shipped policy or a policy directory")
    parser.add_argument("--threads", type=positive_int, nargs="+", default=[1, 2], help="torch threads, one row each")
    parser.add_argument("--requests", type=positive_int, default=60, help="timed requests per row")
    parser.add_argument("--warmup", type=non_negative_int, default=5, help="untimed requests first")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    try:
        check_output_file(args.json, "--json")
    except ConfigError as exc:
        parser.error(str(exc))
    try:
        rows = [measure(args.policy, t, args.requests, args.warmup) for t in args.threads]
    except VlashError as exc:
        print(f"bench_serving_overhead: {exc}", file=sys.stderr)
        return 1
    load = os.getloadavg()[0]
    print(f"{args.policy}, {args.requests} interleaved requests per row, {os.cpu_count()} CPUs, load {load:.2f}")
    print(f"{'threads':>7} {'in-process p50/p99 ms':>22} {'served p50/p99 ms':>20} {'p50 ratio':>9} {'server_ms':>9}")
    for r in rows:
        loc, srv = r["in_process"], r["served"]
        ratio = srv["p50"] / loc["p50"]
        print(f"{r['threads']:>7} {loc['p50']:>10.1f} / {loc['p99']:<9.1f} {srv['p50']:>8.1f} / {srv['p99']:<9.1f} "
              f"{ratio:>9.2f} {r['server_breakdown_p50']['server_ms']:>9.1f}")  # fmt: skip
    for r in rows:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in r["server_breakdown_p50"].items())
        print(f"threads {r['threads']} server breakdown (p50): {parts}")
    if args.json:
        doc = json.dumps({"policy": args.policy, "load": load, "rows": rows}, indent=1)
        atomic_write(args.json, lambda f: f.write(doc.encode()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
