"""No robot stalls another (issue 42): one robot's chunk latency against a live `vlash serve`, alone and beside each
hostile client issue 42 measured, interleaved round by round so the machine's drift falls on every row alike.

    python tools/bench_stalls.py --policy pi05-tiny-sim --threads 1 --rounds 3 --duration-s 10 --out stalls.json
    python tools/bench_stalls.py --quick --out quick.json      # CI's smoke run: one round, 1.5 s per cell

The server is `vlash serve --policy POLICY --threads T --openpi-port P` in its own process, on loopback. The robot is
this process's main thread: a `PolicyClient` asking for a chunk every --period-ms from a random observation of the
policy's cameras and state (seeded), each request waited for (final ACTIONS, an ERROR, or --timeout-s) before the
next slot. Chunks kept: final ACTIONS / requests sent in the measured window; latency: request sent -> final ACTIONS
(client side, monotonic), of the kept chunks. Each hostile kind (tools/hostile_clients.py: malformed headers, the
websocket flood, the openpi bombs) runs in a process of its own, started, connected and answered once by the server
before a cell's --warmup-s (so every row measures the robot beside a client the server is serving), and stopped after
it. Target: the robot's p50 beside every hostile kind <= 2x its p50 alone, and >= 90% of its chunks.
A robot that waits longer asks less often (its next request follows the reply), so the table gives both its chunks
of the requests it sent and its chunks against the same window alone. Each hostile process runs at nice 19
(--hostile-nice): on a real network the attacker's own CPU is another machine's, and here it would otherwise take the
server's cores (--quick, a smoke run whose numbers are not kept, runs them at nice 0 so that a loaded CI machine
cannot starve them).
Progress goes to stderr; a markdown table (with the CPU, the load average and the threads) to stdout; --out gets
the rows and every latency (written atomically).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from hostile_clients import KINDS, NICE, run_hostile, start_hostile, stop_hostile, wait_answered

from robot_io.client import PolicyClient
from robot_io.protocol import Actions, Error, Infer, Metadata
from robot_io.protocol.errors import RobotIOError
from vlash.atomic import atomic_write
from vlash.devices.host_rates import cpu_model

ALONE = "alone"
SCENARIOS = (ALONE, *KINDS)
TARGET_P50_X, TARGET_KEPT = 2.0, 0.9
STARTUP_S = 180.0
FIRST_ANSWER_S = 120.0  # a hostile client the server has not answered by then fails the run


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """`vlash serve` in its own process: its ZeroMQ endpoint and openpi URL once it serves."""

    def __init__(self, policy: str, threads: int) -> None:
        port = free_port()
        cmd = [sys.executable, "-m", "vlash.cli.main", "serve", "--policy", policy, "--device", "cpu"]
        cmd += ["--threads", str(threads), "--bind", "tcp://127.0.0.1:0", "--openpi-port", str(port)]
        cmd += ["--stats-every", "0"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.openpi_url, self.lines, serving = f"ws://127.0.0.1:{port}", [], threading.Event()
        self.endpoint = ""

        def read() -> None:
            for line in self.proc.stdout:
                self.lines.append(line.rstrip())
                if "serving on " in line and not self.endpoint:
                    self.endpoint = line.split("serving on ", 1)[1].split()[0].rstrip(",")
                    serving.set()

        threading.Thread(target=read, daemon=True).start()
        began = time.monotonic()
        while not serving.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() - began > STARTUP_S:
                self.stop()
                raise SystemExit("vlash serve never served:\n" + "\n".join(self.lines[-20:]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Robot:
    """One robot asking for a chunk every `period_s`, each request waited for."""

    def __init__(self, endpoint: str, period_s: float, timeout_s: float, seed: int) -> None:
        self.client = PolicyClient(endpoint, timeout_s=timeout_s + 5, client_name="bench-stalls robot")
        self.metadata: Metadata = self.client.connect()
        self.period_s, self.timeout_s = period_s, timeout_s
        self.rng, self.request_id = np.random.default_rng(seed), 0

    def _infer(self) -> Infer:
        images = {
            c.name: self.rng.integers(0, 256, (c.height, c.width, 3), dtype=np.uint8) for c in self.metadata.cameras
        }
        state = self.rng.standard_normal(self.metadata.state_dim).astype(np.float32)
        self.request_id += 1
        return Infer(self.request_id, self.request_id, time.time_ns(), "pick up the cube", images, state)

    def _one(self) -> tuple[float | None, str | None]:
        """(latency ms of the final ACTIONS, None) or (None, why it was lost)."""
        infer = self._infer()
        sent = time.monotonic_ns()
        self.client.submit(infer)
        deadline = sent + int(self.timeout_s * 1e9)
        while (now := time.monotonic_ns()) < deadline:
            reply = self.client.poll((deadline - now) / 1e9)
            if isinstance(reply, Error) and reply.request_id == infer.request_id:
                return None, reply.code.value
            if isinstance(reply, Actions) and reply.request_id == infer.request_id and reply.final:
                return (time.monotonic_ns() - sent) / 1e6, None
        return None, "timeout"

    def run(self, seconds: float) -> dict:
        """Requests for `seconds`: latencies of kept chunks, and the lost ones by reason."""
        latencies, lost = [], {}
        end, slot = time.monotonic() + seconds, time.monotonic()
        while slot < end:
            try:
                latency, why = self._one()
            except RobotIOError as exc:  # the client dropped its connection: this request is lost
                latency, why = None, type(exc).__name__
            if latency is None:
                lost[why] = lost.get(why, 0) + 1
            else:
                latencies.append(latency)
            slot = max(slot + self.period_s, time.monotonic())
            time.sleep(max(0.0, slot - time.monotonic()))
        return {"latencies_ms": latencies, "lost": lost}


def run_cell(scenario: str, server: Server, robot: Robot, args: argparse.Namespace) -> dict:
    hostile = None
    if scenario != ALONE:
        hostile = start_hostile(scenario, server.endpoint, server.openpi_url, __file__, args.hostile_nice)
    try:
        if hostile:  # a loaded machine can take seconds to reach a niced client's frames
            wait_answered(hostile, FIRST_ANSWER_S)
        robot.run(args.warmup_s)
        measured = robot.run(args.duration_s)
    finally:
        counts = stop_hostile(hostile) if hostile else {}
    return {"scenario": scenario, **measured, "hostile": counts, "load": os.getloadavg()[0]}


def summarize(cells: list[dict]) -> list[dict]:
    rows = []
    for scenario in SCENARIOS:
        mine = [c for c in cells if c["scenario"] == scenario]
        latencies = [x for c in mine for x in c["latencies_ms"]]
        lost = sum(sum(c["lost"].values()) for c in mine)
        p50, p99 = (float(np.percentile(latencies, q)) if latencies else float("nan") for q in (50, 99))
        hostile = {key: sum(c["hostile"].get(key, 0) for c in mine) for key in ("sent", "answered", "refused")}
        rows.append(
            {"scenario": scenario, "kept": len(latencies), "lost": lost, "p50_ms": p50, "p99_ms": p99, **hostile}
        )
    alone = rows[0]
    for row in rows:
        row["p50_x_alone"], row["p99_x_alone"] = row["p50_ms"] / alone["p50_ms"], row["p99_ms"] / alone["p99_ms"]
        row["kept_share"] = row["kept"] / max(1, row["kept"] + row["lost"])
        row["chunks_x_alone"] = row["kept"] / max(1, alone["kept"])  # the chunks it got, against alone
    return rows


def table(rows: list[dict], args: argparse.Namespace, loads: list[float]) -> str:
    head = (
        f"CPU: {cpu_model()}, {os.cpu_count()} cores; server --threads {args.threads}; load average during cells "
        f"{min(loads):.2f}-{max(loads):.2f}; {args.rounds} round(s) of {args.duration_s:g} s per cell\n\n"
        "| beside | robot chunks (of its requests) | chunks x alone | p50 ms | p99 ms | p50 x alone | p99 x alone "
        "| hostile sent / refused |\n|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['scenario']} | {r['kept']}/{r['kept'] + r['lost']} ({100 * r['kept_share']:.0f}%) "
        f"| {r['chunks_x_alone']:.2f} | {r['p50_ms']:.1f} "
        f"| {r['p99_ms']:.1f} | {r['p50_x_alone']:.2f} | {r['p99_x_alone']:.2f} | "
        + (f"{r['sent']} / {r['refused']} |" if r["scenario"] != ALONE else "- |")
        for r in rows
    ]
    return head + "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policy", default="pi05-tiny-sim", help="what vlash serve --policy serves")
    p.add_argument("--threads", type=int, default=1, help="the server's torch threads (issue 42 measured at 1)")
    p.add_argument("--rounds", type=int, default=3, help="every scenario once per round, the order rotating")
    p.add_argument("--duration-s", type=float, default=10.0, help="measured seconds per cell")
    p.add_argument("--warmup-s", type=float, default=2.0, help="unmeasured seconds per cell, hostile clients on")
    p.add_argument("--period-ms", type=float, default=100.0, help="the robot asks for a chunk this often")
    p.add_argument("--timeout-s", type=float, default=10.0, help="a request unanswered this long is lost")
    p.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS), help="rows to run")
    p.add_argument("--hostile-nice", type=int, default=NICE, help="the hostile processes' niceness")
    quick = "smoke run: 1 round, 1.5 s per cell, 0.5 s warm-up, hostile processes at nice 0"
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--out", type=Path, help="JSON of the rows and every latency")
    p.add_argument("--hostile", choices=KINDS, help=argparse.SUPPRESS)  # this file as a hostile client's process
    p.add_argument("--endpoint", help=argparse.SUPPRESS)
    p.add_argument("--openpi-url", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        # nice 0: on a loaded machine (CI's other test worker) a nice-19 process can wait minutes for a core
        args.rounds, args.duration_s, args.warmup_s, args.hostile_nice = 1, 1.5, 0.5, 0
    if ALONE not in args.scenarios:
        p.error("--scenarios must include 'alone': every row is compared with it")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.hostile:
        return run_hostile(args.hostile, args.endpoint, args.openpi_url, args.hostile_nice)
    server = Server(args.policy, args.threads)
    cells = []
    try:
        robot = Robot(server.endpoint, args.period_ms / 1e3, args.timeout_s, seed=0)
        for rnd in range(args.rounds):
            order = args.scenarios[rnd % len(args.scenarios) :] + args.scenarios[: rnd % len(args.scenarios)]
            for scenario in order:
                print(f"round {rnd + 1}/{args.rounds}: {scenario}", file=sys.stderr, flush=True)
                cells.append({**run_cell(scenario, server, robot, args), "round": rnd})
    finally:
        server.stop()
    rows = summarize(cells)
    print(table([r for r in rows if r["scenario"] in args.scenarios], args, [c["load"] for c in cells]))
    if args.out:
        doc = {"args": {k: str(v) for k, v in vars(args).items()}, "cpu": cpu_model(), "rows": rows, "cells": cells}
        atomic_write(args.out, lambda f: f.write(json.dumps(doc, indent=1).encode()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
