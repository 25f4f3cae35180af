"""What Ray Serve adds per request: the same openpi request stream against vlash's own openpi endpoint
(`vlash serve --openpi-port`: `OpenpiEndpoint` in front of a `PolicyServer`) and against the Ray Serve fleet
(vlash.fleet: the openpi ingress and one model replica), pi05-tiny with random weights, interleaved round by round.

    python tools/bench_fleet.py --robots 1 4 --duration-s 20 --rounds 3 --out fleet.json

Robots are openpi clients in this process, one thread each: openpi_client's WebsocketClientPolicy when it is
installed, else openpi's wire format through websockets' sync client and vlash.server.openpi_codec (openpi-client
pins numpy < 2). Each sends its observation (vlash's native layout, which both `auto` maps take) every
--replan-steps control steps at --rate-hz (10 at 30 Hz: every 333 ms), starting at a random phase (seeded, the same
for both paths), and waits for the reply; a reply later than the next slot moves the robot to the first slot after
it (tools/bench_batching.py's request stream). A cell's clock starts once every robot has connected and had one
reply (not measured: a new connection's first request); latency is observation sent -> reply received, monotonic
clock, of the requests sent after --warmup-s of the same load, pooled over robots and rounds. A robot keeps asking
past --duration-s until it has one measured request, so a slow machine gives slow numbers, never none.

Both servers run outside this process with the same torch threads (--threads: `vlash serve --threads`, the replica's
OMP_NUM_THREADS), max_batch and batch_wait_ms; both stay up for the whole run, the idle one waiting while the
other serves. Ray starts here as a new local instance (never an existing cluster), its HTTP proxy on 127.0.0.1;
its own services bind the node's address, as Ray does. Without Ray installed the tool says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vlash.atomic import atomic_write
from vlash.cli.cpu_threads import available_cores, server_threads
from vlash.progress import clock_text

POLICY = "pi05-tiny"
PROMPT = "pick up the cube"
PATHS = ("vlash openpi endpoint", "Ray Serve fleet")
START_S = 180.0  # longest wait for either server to serve


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MinimalOpenpiClient:
    """openpi's WebsocketClientPolicy in a few lines: the metadata frame on connect, one frame each way."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        from vlash.server.openpi_codec import packb, unpackb

        self._packb, self._unpackb = packb, unpackb
        self._stack = ExitStack()  # websockets wants its sync connection used as a context manager
        self._ws = self._stack.enter_context(connect(url, compression=None, max_size=None, open_timeout=30))
        self.metadata = unpackb(self._ws.recv(timeout=30))

    def infer(self, observation: dict) -> dict:
        self._ws.send(self._packb(observation))
        reply = self._ws.recv(timeout=120)
        if isinstance(reply, str):
            raise RuntimeError(f"openpi error reply: {reply}")
        return self._unpackb(reply)

    def close(self) -> None:
        self._stack.close()


class OpenpiClient:
    """openpi_client's own WebsocketClientPolicy when installed (infer, get_server_metadata), else
    MinimalOpenpiClient; both reach ws://host:port as openpi's robot scripts do."""

    def __init__(self, url: str) -> None:
        try:
            from openpi_client.websocket_client_policy import WebsocketClientPolicy
        except ImportError:
            self._impl = MinimalOpenpiClient(url)
            self.metadata, self.close = self._impl.metadata, self._impl.close
        else:
            host, port = url.removeprefix("ws://").rsplit(":", 1)
            self._impl = WebsocketClientPolicy(host=host, port=int(port))
            self.metadata, self.close = self._impl.get_server_metadata(), getattr(self._impl, "close", lambda: None)
        self.infer = self._impl.infer


@dataclass
class Window:
    """One cell's schedule, monotonic ns, set when every robot is primed: robots start at start_ns (+ their phase)
    and are measured from measure_ns."""

    start_ns: int = 0
    measure_ns: int = 0
    end_ns: int = 0


class Robot(threading.Thread):
    """One openpi robot (see the module docstring); a failure ends it, is kept in `failure` and breaks `primed`."""

    def __init__(self, index: int, url: str, phase_s: float, window: Window, primed: threading.Barrier, args) -> None:
        super().__init__(name=f"robot-{index}", daemon=True)
        self.index, self.url, self.phase_s, self.args = index, url, phase_s, args
        self.window, self.primed = window, primed
        self.latencies_ms: list[float] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            client = OpenpiClient(self.url)
            try:
                observation = self._observation(client.metadata)
                client.infer(observation)  # a new connection's first request: not measured
                self.primed.wait(START_S)
                self._stream(client, observation)
            finally:
                client.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the cell
            self.failure = exc
            self.primed.abort()

    def _observation(self, meta: dict) -> dict:
        rng = np.random.default_rng([self.args.seed, self.index])
        images = {c["name"]: rng.integers(0, 256, (c["height"], c["width"], 3), np.uint8) for c in meta["cameras"]}
        state = rng.uniform(-1, 1, meta["state_dim"]).astype(np.float32)
        return {"images": images, "state": state, "prompt": PROMPT}

    def _stream(self, client: OpenpiClient, observation: dict) -> None:
        period = round(self.args.replan_steps / self.args.rate_hz * 1e9)
        slot = self.window.start_ns + int(self.phase_s * 1e9)
        while slot < self.window.end_ns or not self.latencies_ms:
            time.sleep(max(0, slot - time.monotonic_ns()) / 1e9)
            sent = time.monotonic_ns()
            client.infer(observation)
            now = time.monotonic_ns()
            if sent >= self.window.measure_ns:
                self.latencies_ms.append((now - sent) / 1e6)
            slot += max(1, -(-(now - slot) // period)) * period  # the first slot not yet passed


def run_cell(url: str, path: str, n: int, rnd: int, args) -> dict:
    """N robots against `url`: each connects and is primed, then --warmup-s + --duration-s of requests."""
    phases = np.random.default_rng([args.seed, rnd, n]).uniform(0, args.replan_steps / args.rate_hz, n)
    window = Window()

    def open_window() -> None:  # the barrier's action: runs once, before any robot is released
        window.start_ns = time.monotonic_ns() + 100_000_000
        window.measure_ns = window.start_ns + int(args.warmup_s * 1e9)
        window.end_ns = window.measure_ns + int(args.duration_s * 1e9)

    primed = threading.Barrier(n + 1, action=open_window)
    robots = [Robot(i, url, phases[i], window, primed, args) for i in range(n)]
    for robot in robots:
        robot.start()
    with suppress(threading.BrokenBarrierError):  # a robot failed or was not primed in time: reported below
        primed.wait(START_S)
    for robot in robots:
        robot.join(args.duration_s + args.warmup_s + 180)
    failed = [f"{r.name}: {r.failure!r}" for r in robots if r.failure is not None or r.is_alive()]
    if failed:
        raise RuntimeError(f"{path}, {n} robots: {failed}")
    latencies = [x for r in robots for x in r.latencies_ms]
    return {"path": path, "robots": n, "round": rnd, "latencies_ms": latencies, "load": os.getloadavg()[0]}


def start_vlash(args, stack: ExitStack) -> str:
    """`vlash serve --openpi-port 0` in a child process (stopped with SIGTERM when `stack` closes); its ws:// URL.
    Its output is read by a thread, line by line, so the pipe never fills."""
    serve = ["--policy", POLICY, "--random-weights", "--device", "cpu", "--threads", str(args.threads),
             "--max-batch", str(args.max_batch), "--batch-wait-ms", str(args.batch_wait_ms),
             "--bind", "tcp://127.0.0.1:0", "--openpi-port", "0", "--stats-every", "0"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "vlash.cli.main", "serve", *serve]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    stack.callback(_stop, proc)
    urls: queue.Queue[str] = queue.Queue()

    def read() -> None:
        url = None
        for line in proc.stdout:
            if match := re.search(r"openpi clients on (ws://\S+)", line):
                url = match.group(1)
            if "serving on" in line and url is not None:
                urls.put(url)

    threading.Thread(target=read, daemon=True).start()
    try:
        return urls.get(timeout=START_S)
    except queue.Empty:
        raise RuntimeError(f"vlash serve did not serve within {START_S:.0f} s (exit code {proc.poll()})") from None


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(15)


def start_ray(args, stack: ExitStack) -> str:
    """A new local Ray instance in this process and the fleet on it (1 replica); its ws:// URL."""
    import ray
    from ray import serve

    from vlash.fleet.app import APP_NAME, allow_slow_proxy_start, fleet_app
    from vlash.fleet.config import FleetConfig

    config = FleetConfig(policy=POLICY, random_weights=True, device="cpu", num_replicas=1, num_cpus=0,
                         ingress_num_cpus=0, max_batch=args.max_batch, batch_wait_ms=args.batch_wait_ms)  # fmt: skip
    port = _free_port()
    env = {"OMP_NUM_THREADS": str(args.threads)}  # the replica's torch threads
    allow_slow_proxy_start()  # before ray.init: a loaded machine's proxy needs more than Ray's 5 s
    # a new local instance, never a running cluster; replica logs stay in Ray's log files, off this stderr
    ray.init(address="local", num_cpus=available_cores(), include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env})  # fmt: skip
    stack.callback(ray.shutdown)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    stack.callback(serve.shutdown)
    serve.run(fleet_app(config), name=APP_NAME, route_prefix="/")  # returns once the replica runs
    return f"ws://127.0.0.1:{port}"


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(cells: list[dict], robots: list[int]) -> tuple[list[dict], list[dict]]:
    """Latency rows per (robots, path), pooled over rounds, and Ray's overhead per robot count."""
    rows, overhead = [], []
    for n in robots:
        by = {}
        for path in PATHS:
            lat = [x for c in cells if (c["robots"], c["path"]) == (n, path) for x in c["latencies_ms"]]
            by[path] = dict(robots=n, path=path, requests=len(lat), p50_ms=_pct(lat, 50), p99_ms=_pct(lat, 99))
            rows.append(by[path])
        vlash, fleet = by[PATHS[0]], by[PATHS[1]]
        if vlash["p50_ms"] and fleet["p50_ms"]:
            overhead.append({"robots": n, "p50_diff_ms": fleet["p50_ms"] - vlash["p50_ms"],
                             "p50_ratio": fleet["p50_ms"] / vlash["p50_ms"],
                             "p99_ratio": fleet["p99_ms"] / vlash["p99_ms"]})  # fmt: skip
    return rows, overhead


def report(rows: list[dict], overhead: list[dict]) -> str:
    lines = ["| robots | path | requests | latency p50 / p99 ms |", "|---|---|---|---|"]
    for r in rows:
        if r["requests"]:
            lines.append(f"| {r['robots']} | {r['path']} | {r['requests']} | {r['p50_ms']:.1f} / {r['p99_ms']:.1f} |")
    lines += ["", "| robots | Ray adds at p50 ms (fleet - vlash) | fleet / vlash p50 | fleet / vlash p99 |"]
    lines.append("|---|---|---|---|")
    for o in overhead:
        lines.append(f"| {o['robots']} | {o['p50_diff_ms']:+.1f} | {o['p50_ratio']:.2f} | {o['p99_ratio']:.2f} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robots", type=int, nargs="+", default=[1, 4], help="robots per cell")
    p.add_argument("--duration-s", type=float, default=20.0, help="measured seconds per cell")
    p.add_argument("--warmup-s", type=float, default=2.0, help="seconds of the same load before measuring")
    p.add_argument("--rounds", type=int, default=3, help="rounds, each running both paths (order alternating)")
    p.add_argument("--rate-hz", type=float, default=30.0, help="control rate of every robot")
    p.add_argument("--replan-steps", type=int, default=10, help="control steps between a robot's requests")
    p.add_argument("--max-batch", type=int, default=8, help="max_batch of both servers")
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="batch_wait_ms of both servers")
    p.add_argument("--threads", type=int, default=None, help="torch threads of both (default: all cores but one)")
    p.add_argument("--seed", type=int, default=0, help="observations and start phases")
    p.add_argument("--out", type=Path, default=None, help="JSON file of the cells, rows and overhead")
    args = p.parse_args(argv)
    args.threads = server_threads(args.threads)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import ray  # noqa: F401
        from ray import serve  # noqa: F401
    except ModuleNotFoundError:
        print("bench_fleet: skipped: Ray Serve is not installed (pip install 'vlash[fleet]')", file=sys.stderr)
        return 0
    load_before, began = "/".join(f"{x:.2f}" for x in os.getloadavg()), time.monotonic()
    cells, total = [], args.rounds * len(args.robots) * len(PATHS)
    with ExitStack() as stack:
        print("bench_fleet: starting vlash serve --openpi-port and the Ray Serve fleet", file=sys.stderr, flush=True)
        urls = dict(zip(PATHS, (start_vlash(args, stack), start_ray(args, stack)), strict=True))
        print(f"bench_fleet: both up after {clock_text(time.monotonic() - began)}", file=sys.stderr, flush=True)
        for rnd in range(args.rounds):
            for n in args.robots:
                for path in PATHS if (rnd + n) % 2 == 0 else PATHS[::-1]:
                    cells.append(run_cell(urls[path], path, n, rnd, args))
                    lat = cells[-1]["latencies_ms"]
                    print(f"bench_fleet: {len(cells)}/{total} {path}, {n} robots, round {rnd + 1}: {len(lat)} "
                          f"requests, p50 {_pct(lat, 50) or 0:.1f} ms p99 {_pct(lat, 99) or 0:.1f} ms; elapsed "
                          f"{clock_text(time.monotonic() - began)}", file=sys.stderr, flush=True)  # fmt: skip
    rows, overhead = summarize(cells, args.robots)
    print(f"{POLICY} (random weights) on CPU, {args.threads} torch threads per server, max_batch {args.max_batch}, "
          f"{args.rate_hz:g} Hz robots asking every {args.replan_steps} steps, {args.duration_s:g} s measured per "
          f"cell, {args.rounds} rounds, {os.cpu_count()} CPUs, load {load_before} before")  # fmt: skip
    print(report(rows, overhead))
    if args.out:
        doc = {"command": " ".join(["python", "tools/bench_fleet.py", *(argv or sys.argv[1:])]),
               "settings": {k: v for k, v in vars(args).items() if k != "out"}, "cells": cells, "rows": rows,
               "overhead": overhead}  # fmt: skip
        atomic_write(args.out, lambda f: f.write(json.dumps(doc, indent=1).encode()))  # whole or not at all
    return 0


if __name__ == "__main__":
    sys.exit(main())
