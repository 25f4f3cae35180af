"""Time to first action (TTFA) and full-chunk latency at the client, over loopback ZeroMQ, for the constant
and horizon-aware schedules: an in-process `PolicyServer` with a random-weight preset and a `PolicyClient`.

    python tools/bench_serve_ttfa.py --policy pi05-tiny --requests 30 --threads 2
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, Error, Infer
from vlash.runtime.loading import load_runtime
from vlash.server.config import ServerConfig
from vlash.server.requests import policy_metadata
from vlash.server.server import PolicyServer


def measure(client: PolicyClient, infer: Infer, timeout_s: float = 30.0) -> tuple[float, float]:
    """(ms to the first final action, ms to the final chunk) for one request, at the client."""
    start = time.perf_counter()
    client.submit(infer)
    first = None
    while True:
        message = client.poll(timeout_s)
        if isinstance(message, Error):
            raise RuntimeError(f"server error: {message}")
        if not isinstance(message, Actions) or message.request_id != infer.request_id:
            continue
        now = (time.perf_counter() - start) * 1e3
        first = now if first is None else first
        if message.final:
            return first, now


def load() -> str:
    """1/5/15-minute load average: other work on the machine moves these numbers."""
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="pi05-tiny", help="preset (random weights)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--inject-latency", type=float, default=0.0, metavar="MS")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load_runtime(args.policy, random_weights=True, device=args.device)
    runtime = loaded.runtime
    metadata = policy_metadata(runtime, loaded.model_id, "torch", loaded.precision)
    config = ServerConfig(bind="tcp://127.0.0.1:0", inject_latency_ms=args.inject_latency, warm_up_runs=4)
    with PolicyServer(runtime, metadata, config) as server, PolicyClient(server.endpoint, timeout_s=30.0) as client:
        meta = client.connect()
        size = meta.cameras[0].height
        images = {c.name: np.zeros((size, size, 3), np.uint8) for c in meta.cameras}
        state = np.zeros(meta.state_dim, np.float32)
        print(
            f"{loaded.model_id} {loaded.precision} on {runtime.engine.device}, {meta.num_steps} steps, "
            f"threads={torch.get_num_threads()}, {args.requests} requests per schedule, loopback tcp, "
            f"load average {load()}"
        )
        rid = 0
        for schedule in ("constant", "horizon-aware"):
            rows = []
            for i in range(args.requests):
                rid += 1
                rows.append(
                    measure(
                        client,
                        Infer(rid, i, time.time_ns(), "go to the goal", images, state, schedule=schedule, seed=i),
                    )
                )
            ttfa, chunk = np.array(rows).T
            print(
                f"{schedule:>14}: TTFA median {np.median(ttfa):7.1f} ms p99 {np.percentile(ttfa, 99):7.1f} ms | "
                f"chunk median {np.median(chunk):7.1f} ms p99 {np.percentile(chunk, 99):7.1f} ms | load {load()}"
            )


if __name__ == "__main__":
    main()
