"""Control-loop period jitter with the policy server on the same machine: sim:reach driven in vlash mode at
each rate through real ZeroMQ (tcp loopback), the server in a child process (`vlash serve`, as `vlash demo`
runs it) or in a thread of this process (`--placement thread`: shares the GIL with the loop).

    python tools/bench_control_loop.py --rates 30 50 --duration 20 --placement process thread

Jitter = |actual tick period - scheduled period| (robot_io.control.ControlLoop). Prints the 1/5/15-minute
load average before and after: the numbers depend on what else runs on the machine.
"""

from __future__ import annotations

import argparse
import os
from contextlib import ExitStack

from robot_io.client import PolicyClient
from robot_io.executors import ExecutorConfig
from robot_io.robots import SimRobot
from robot_io.runner import RunConfig, RunResult, run_robot
from vlash.demo.server_process import ServerProcess


def drive(endpoint: str, rate_hz: float, duration_s: float, horizon: int) -> RunResult:
    config = RunConfig(ExecutorConfig("vlash", execution_horizon=horizon), rate_hz=rate_hz, duration_s=duration_s)
    with PolicyClient(endpoint, timeout_s=10.0, client_name="bench-control-loop") as client:
        camera = client.connect().cameras[0].name
        return run_robot(SimRobot("reach", camera=camera), client, config)


class ThreadServer:
    """The same server in a thread of this process (imports torch here)."""

    def __init__(self, policy: str, threads: int, inject_ms: float) -> None:
        import torch

        from vlash.runtime.loading import load_runtime
        from vlash.server.config import ServerConfig
        from vlash.server.requests import policy_metadata
        from vlash.server.server import PolicyServer

        torch.set_num_threads(threads)
        loaded = load_runtime(policy, random_weights=True, device="cpu")
        meta = policy_metadata(loaded.runtime, loaded.model_id, "torch", loaded.precision)
        config = ServerConfig(bind="tcp://127.0.0.1:0", inject_latency_ms=inject_ms, warm_up_runs=2)
        self.server = PolicyServer(loaded.runtime, meta, config)

    def __enter__(self) -> str:
        return self.server.start()

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def start_server(placement: str, args: argparse.Namespace, stack: ExitStack) -> str:
    """Start the server (stopped when `stack` closes) and return its endpoint."""
    if placement == "thread":
        return stack.enter_context(ThreadServer(args.policy, args.threads, args.inject_latency))
    serve = ["--policy", args.policy, "--random-weights", "--device", "cpu", "--threads", str(args.threads),
             "--inject-latency", str(args.inject_latency)]  # fmt: skip
    server = stack.enter_context(ServerProcess(serve))
    return server.start()


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="pi05-tiny", help="preset served with random weights")
    parser.add_argument("--rates", type=float, nargs="+", default=[30.0, 50.0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per row")
    parser.add_argument("--placement", nargs="+", choices=("process", "thread"), default=["process"])
    parser.add_argument("--threads", type=int, default=1, help="server torch threads")
    parser.add_argument("--horizon", type=int, default=20, help="s (execution horizon) in control steps")
    parser.add_argument("--inject-latency", type=float, default=0.0, metavar="MS")
    args = parser.parse_args()
    print(f"{args.policy} (random weights) on cpu, server threads={args.threads}, vlash mode, s={args.horizon}, "
          f"{args.duration:g} s per row, {os.cpu_count()} cores, load average before {load()}")  # fmt: skip
    header = (
        "| server | rate Hz | ticks | jitter p50 ms | jitter p99 ms | jitter max ms | tick p99 ms | overruns "
        "| missed deadlines | chunk latency p50 ms | load avg (1/5/15 min) |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for placement in args.placement:
        with ExitStack() as stack:
            endpoint = start_server(placement, args, stack)
            for rate in args.rates:
                r = drive(endpoint, rate, args.duration, args.horizon)
                s, lp = r.summary, r.loop
                lat = "-" if s.latency_p50_ms is None else f"{s.latency_p50_ms:.0f}"
                print(f"| {placement} | {rate:g} | {s.ticks} | {lp.jitter_p50_ms:.3f} | {lp.jitter_p99_ms:.2f} | "
                      f"{lp.jitter_max_ms:.2f} | {lp.tick_p99_ms:.2f} | {lp.overruns} | {s.missed_deadlines} | {lat} | "
                      f"{load()} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
