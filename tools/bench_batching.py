"""Batching under load: N simulated robots against one in-process `PolicyServer` that batches their requests
(`batched`: ServerConfig.max_batch = --max-batch) or serves them one at a time (`one-at-a-time`: max_batch = 1),
the two interleaved round by round (ABAB...) so the machine's drift falls on both alike.

    python tools/bench_batching.py --policies pi05-tiny pi05-small --robots 1 2 4 8 --duration-s 20 --rounds 2 \
        --out batching.json
    python tools/bench_batching.py --quick --out quick.json   # N = 1, 2 on pi05-tiny, 1.5 s per cell, one round

Each robot is a thread with its own `robot_io.client.PolicyClient` on a `robot_io.control.ControlLoop` at
--rate-hz (30) and asks for a new chunk every --replan-steps control steps (10: every 333 ms, chunk-execution
style), from its own observation (random images and state, seeded); robots start at random phases within one
replan interval (seeded, the same for both modes of a round). The fixed request slots give both modes the same
offered load; robot_io's executors instead launch at s - d, d adapting to the measured latency.

Missed deadline: a request slot at which the robot's previous request has not returned yet (no final ACTIONS).
The robot keeps its pending request and asks again at the first slot after the reply. This is not robot_io's own
count (RunSummary.missed_deadlines: control ticks whose running chunk had no final action), which depends on the
chunk length and the execution mode as well as on the server; the deadline here is the replan interval s, the
latest reply robot_io's async modes can plan for (ExecutorConfig.max_delay caps d at s).

Per cell (policy, N, mode, round): chunks/s (final ACTIONS received by all robots during the measured --duration-s,
after --warmup-s of the same load), latency p50 / p99 (request sent -> final ACTIONS received, client side,
monotonic clock, the requests sent while measured, pooled over robots), missed deadlines (count and % of the
measured slots), and from the server's STATS counters: the mean batch size over the measured window
(batch_size_<b> differences) and queue_wait_p50_ms (the server's last 1000 requests: warm-up included).
The server and the robots share this process (one GIL); torch uses --threads (default: all cores but one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_io.client import PolicyClient
from robot_io.control import ControlLoop, MonotonicClock, Tick
from robot_io.protocol import Actions, Error, Infer, Metadata
from robot_io.protocol.errors import RobotIOError
from vlash.progress import clock_text

PROMPT = "pick up the cube"
MODES = ("batched", "one-at-a-time")
TARGET = ("pi05-small", 4, 2.0)  # the issue's target: at N = 4 on pi05-small, >= 2x chunks/s and a lower p99


@dataclass(frozen=True)
class Window:
    """One cell's schedule, monotonic ns: robots start at start_ns (+ their phase); measured from measure_ns."""

    start_ns: int
    measure_ns: int
    end_ns: int


@dataclass
class Pending:
    request_id: int
    sent_ns: int
    measured: bool  # sent while measured: its latency counts


class Robot(threading.Thread):
    """One simulated robot (see the module docstring). Any failure ends it and is kept in `failure`."""

    def __init__(self, index: int, endpoint: str, window: Window, phase_s: float, args: argparse.Namespace) -> None:
        super().__init__(name=f"robot-{index}", daemon=True)
        self.index, self.endpoint, self.window, self.phase_s, self.args = index, endpoint, window, phase_s, args
        self.latencies_ms: list[float] = []
        self.chunks = self.due = self.missed = self.errors = 0
        self.failure: BaseException | None = None
        self._pending: Pending | None = None
        self._next_id = 0
        self._next_slot = 0  # control step of the next request slot

    def run(self) -> None:
        try:
            with PolicyClient(self.endpoint, self.args.timeout_s, f"bench-robot-{self.index}") as client:
                self._client = client
                self._observation(client.connect())
                _sleep_until(self.window.start_ns + int(self.phase_s * 1e9))
                loop = ControlLoop(self.args.rate_hz, MonotonicClock(spin_ns=0))  # no spinning: the server's CPU
                loop.run(self._tick, (self.window.end_ns - time.monotonic_ns()) / 1e9, idle=self._receive)
                deadline = time.monotonic_ns() + int(self.args.timeout_s * 1e9)
                while self._pending is not None and self._pending.measured and time.monotonic_ns() < deadline:
                    self._receive(deadline, once=True)  # the last measured request's latency
        except BaseException as exc:  # noqa: BLE001 - reported by the cell
            self.failure = exc

    def _observation(self, meta: Metadata) -> None:
        rng = np.random.default_rng([self.args.seed, self.index])
        self.images = {c.name: rng.integers(0, 256, (c.height, c.width, 3), dtype=np.uint8) for c in meta.cameras}
        self.state = rng.uniform(-1, 1, meta.state_dim).astype(np.float32)

    def _tick(self, tick: Tick) -> None:
        self._receive(0)
        if tick.index < self._next_slot:
            return
        self._next_slot = (tick.index // self.args.replan_steps + 1) * self.args.replan_steps  # a late tick: once
        measured = self.window.measure_ns <= tick.start_ns
        self.due += measured
        if self._pending is not None:
            self.missed += measured  # the previous request has not returned: keep it
            return
        self._next_id += 1
        rid = self._next_id
        infer = Infer(rid, tick.index, time.time_ns(), PROMPT, self.images, self.state, seed=self.index * 10**6 + rid)
        sent = time.monotonic_ns()
        try:
            self._client.submit(infer)
        except RobotIOError:
            self.errors += 1
            return
        self._pending = Pending(rid, sent, measured)

    def _receive(self, until_ns: int, once: bool = False) -> None:
        """Take replies until `until_ns` (0: those already there), or until one is taken with `once`."""
        while True:
            try:
                message = self._client.poll(max(until_ns - time.monotonic_ns(), 0) / 1e9)
            except RobotIOError:  # no reply within timeout_s: the client dropped the connection
                self.errors, self._pending = self.errors + 1, None
                return
            if message is None:
                return
            self._handle(message, time.monotonic_ns())
            if once:
                return

    def _handle(self, message: Actions | Error, now: int) -> None:
        pending = self._pending
        if pending is None or message.request_id != pending.request_id:
            return
        if isinstance(message, Error):
            self.errors, self._pending = self.errors + 1, None
            return
        if not message.final:
            return
        self.chunks += self.window.measure_ns <= now < self.window.end_ns
        if pending.measured:
            self.latencies_ms.append((now - pending.sent_ns) / 1e6)
        self._pending = None


def _sleep_until(deadline_ns: int) -> None:
    time.sleep(max(0, deadline_ns - time.monotonic_ns()) / 1e9)


def _batches(counters: dict) -> dict[int, int]:
    """STATS' batch histogram: batch size -> batches of that size since the server started."""
    prefix = "batch_size_"
    return {int(k[len(prefix) :]): int(v) for k, v in counters.items() if k.startswith(prefix) and k[-1].isdigit()}


def run_cell(runtime, metadata: Metadata, policy: str, n: int, mode: str, rnd: int, args) -> dict:
    """One cell: a fresh server with this mode's max_batch, N robots for --warmup-s + --duration-s."""
    from vlash.server.config import ServerConfig
    from vlash.server.server import PolicyServer

    bind = "tcp://127.0.0.1:0" if args.transport == "tcp" else f"ipc://{args.ipc_dir}/{uuid.uuid4().hex[:12]}"
    max_batch = args.max_batch if mode == "batched" else 1
    config = ServerConfig(bind=bind, max_batch=max_batch, batch_wait_ms=args.batch_wait_ms, warm_up_runs=2)
    phases = np.random.default_rng([args.seed, rnd, n]).uniform(0, args.replan_steps / args.rate_hz, n)
    with PolicyServer(runtime, metadata, config) as server:
        start = time.monotonic_ns() + 300_000_000  # the robots connect meanwhile
        measure = start + int(args.warmup_s * 1e9)
        window = Window(start, measure, measure + int(args.duration_s * 1e9))
        robots = [Robot(i, server.endpoint, window, phases[i], args) for i in range(n)]
        for robot in robots:
            robot.start()
        _sleep_until(window.measure_ns)
        before = _batches(server.counters())
        _sleep_until(window.end_ns)
        after = server.counters()
        for robot in robots:
            robot.join(args.timeout_s + 10)
    failed = [f"{r.name}: {r.failure!r}" for r in robots if r.failure is not None or r.is_alive()]
    if failed:
        raise RuntimeError(f"{policy} N={n} {mode}: robots failed: {failed}")
    sizes = {b: c - before.get(b, 0) for b, c in _batches(after).items() if c > before.get(b, 0)}
    return {
        "policy": policy, "robots": n, "mode": mode, "max_batch": server.max_batch, "round": rnd,
        "seconds": args.duration_s, "chunks": sum(r.chunks for r in robots),
        "due": sum(r.due for r in robots), "missed": sum(r.missed for r in robots),
        "errors": sum(r.errors for r in robots), "latencies_ms": [x for r in robots for x in r.latencies_ms],
        "robot_p99_ms": [_pct(r.latencies_ms, 99) for r in robots],
        "batch_sizes": sizes, "queue_wait_p50_ms": after.get("queue_wait_p50_ms"), "load": os.getloadavg()[0],
    }  # fmt: skip


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(cells: list[dict]) -> dict:
    """The rounds of one (policy, N, mode) pooled: chunks over seconds, latencies pooled, batches summed."""
    lat = [x for c in cells for x in c["latencies_ms"]]
    chunks, seconds = sum(c["chunks"] for c in cells), sum(c["seconds"] for c in cells)
    due, missed = sum(c["due"] for c in cells), sum(c["missed"] for c in cells)
    sizes: dict[int, int] = {}
    for c in cells:
        for b, count in c["batch_sizes"].items():
            sizes[b] = sizes.get(b, 0) + count
    waits = [c["queue_wait_p50_ms"] for c in cells if c["queue_wait_p50_ms"] is not None]
    first = cells[0]
    return {
        "policy": first["policy"], "robots": first["robots"], "mode": first["mode"], "max_batch": first["max_batch"],
        "rounds": len(cells), "chunks": chunks, "seconds": seconds, "chunks_per_s": chunks / seconds,
        "latency_p50_ms": _pct(lat, 50), "latency_p99_ms": _pct(lat, 99), "latency_n": len(lat),
        "missed": missed, "due": due, "missed_pct": 100.0 * missed / due if due else 0.0,
        "errors": sum(c["errors"] for c in cells),
        "batch_size_mean": sum(b * k for b, k in sizes.items()) / sum(sizes.values()) if sizes else None,
        "queue_wait_p50_ms": float(np.median(waits)) if waits else None,
    }  # fmt: skip


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def ratios(rows: list[dict]) -> list[dict]:
    """batched / one-at-a-time per (policy, N): chunks/s and latency p99."""
    by = {(r["policy"], r["robots"], r["mode"]): r for r in rows}
    out = []
    for (policy, n, mode), b in by.items():
        if mode == "batched" and (one := by.get((policy, n, "one-at-a-time"))) is not None:
            chunks = _ratio(b["chunks_per_s"], one["chunks_per_s"])
            out.append({"policy": policy, "robots": n, "chunks_per_s": chunks,
                        "p99": _ratio(b["latency_p99_ms"], one["latency_p99_ms"])})  # fmt: skip
    return out


def _f(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def report(rows: list[dict], ratio_rows: list[dict]) -> str:
    """The markdown tables: one row per (policy, N, mode), then the ratios per (policy, N)."""
    lines = [
        "| policy | robots | mode | max batch | chunks/s | latency p50 / p99 ms | missed deadlines | errors "
        "| batch size mean | queue wait p50 ms |",
        "|---" * 10 + "|",
    ]
    for r in rows:
        lines.append(f"| {r['policy']} | {r['robots']} | {r['mode']} | {r['max_batch']} | {r['chunks_per_s']:.2f} | "
                     f"{_f(r['latency_p50_ms'])} / {_f(r['latency_p99_ms'])} | {r['missed']}/{r['due']} "
                     f"({r['missed_pct']:.0f}%) | {r['errors']} | {_f(r['batch_size_mean'], '.2f')} | "
                     f"{_f(r['queue_wait_p50_ms'])} |")  # fmt: skip
    lines += ["", "| policy | robots | chunks/s batched / one-at-a-time | p99 batched / one-at-a-time |"]
    lines.append("|---|---|---|---|")
    for r in ratio_rows:
        lines.append(f"| {r['policy']} | {r['robots']} | {_f(r['chunks_per_s'], '.2f')} | {_f(r['p99'], '.2f')} |")
    return "\n".join(lines)


def target(ratio_rows: list[dict]) -> dict:
    """Whether the issue's target holds in this run (None: its cell was not run)."""
    policy, n, speedup = TARGET
    row = next((r for r in ratio_rows if (r["policy"], r["robots"]) == (policy, n)), None)
    holds = None
    if row is not None:
        holds = (row["chunks_per_s"] or 0.0) >= speedup and row["p99"] is not None and row["p99"] < 1.0
    return {"policy": policy, "robots": n, "min_chunks_ratio": speedup, "holds": holds, "ratios": row}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policies", nargs="+", default=["pi05-tiny", "pi05-small"], help="presets, random weights")
    p.add_argument("--robots", type=int, nargs="+", default=[1, 2, 4, 8], help="N: robots per cell")
    p.add_argument("--duration-s", type=float, default=20.0, help="measured seconds per cell")
    p.add_argument("--warmup-s", type=float, default=3.0, help="seconds of the same load before measuring")
    p.add_argument("--rounds", type=int, default=2, help="rounds, each running both modes (ABAB...)")
    p.add_argument("--rate-hz", type=float, default=30.0, help="control rate of every robot")
    p.add_argument("--replan-steps", type=int, default=10, help="control steps between a robot's requests")
    p.add_argument("--max-batch", type=int, default=8, help="ServerConfig.max_batch of the batched mode")
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="ServerConfig.batch_wait_ms")
    p.add_argument("--transport", choices=("tcp", "ipc"), default="tcp", help="loopback tcp or ipc://")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores but one)")
    p.add_argument("--timeout-s", type=float, default=120.0, help="a robot's longest wait for one reply")
    p.add_argument("--seed", type=int, default=0, help="observations and start phases")
    p.add_argument("--out", type=Path, default=None, help="JSON file of the cells, rows, ratios and target")
    p.add_argument("--quick", action="store_true", help="N = 1, 2 on pi05-tiny, 1.5 s per cell, 1 round (tests)")
    args = p.parse_args(argv)
    if args.quick:
        args.policies, args.robots, args.duration_s, args.warmup_s, args.rounds = ["pi05-tiny"], [1, 2], 1.5, 0.5, 1
    return args


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def run_all(args: argparse.Namespace) -> list[dict]:
    """Every cell: per policy and N, the rounds, each running both modes in turn (ABAB...)."""
    from vlash.runtime.loading import load_runtime
    from vlash.runtime.metadata import policy_metadata

    total, cells, began = len(args.policies) * len(args.robots) * args.rounds * len(MODES), [], time.monotonic()
    for policy in args.policies:
        print(f"bench_batching: loading {policy} (random weights)", file=sys.stderr, flush=True)
        loaded = load_runtime(policy, random_weights=True, device="cpu", engine="torch")
        meta = policy_metadata(loaded.runtime, loaded.model_id, "torch", loaded.precision, args.rate_hz)
        for n in args.robots:
            for rnd in range(args.rounds):
                for mode in MODES:
                    cell = run_cell(loaded.runtime, meta, policy, n, mode, rnd, args)
                    cells.append(cell)
                    elapsed, done = time.monotonic() - began, len(cells)
                    p99, eta = _f(_pct(cell["latencies_ms"], 99)), elapsed * (total - done) / done
                    print(f"bench_batching: {done}/{total} {policy} N={n} {mode} round {rnd + 1}: "
                          f"{cell['chunks'] / cell['seconds']:.2f} chunks/s, p99 {p99} ms, missed "
                          f"{cell['missed']}/{cell['due']}, load {cell['load']:.2f}; elapsed {clock_text(elapsed)} "
                          f"eta {clock_text(eta)}", file=sys.stderr, flush=True)  # fmt: skip
    return cells


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from vlash.cli.cpu_threads import server_threads

    torch.set_num_threads(server_threads(args.threads))
    args.ipc_dir = tempfile.mkdtemp(prefix="bench-batching-")
    load_before = _load()
    cells = run_all(args)
    keys = dict.fromkeys((c["policy"], c["robots"], c["mode"]) for c in cells)
    rows = [summarize([c for c in cells if (c["policy"], c["robots"], c["mode"]) == k]) for k in keys]
    ratio_rows = ratios(rows)
    goal = target(ratio_rows)
    print(f"{', '.join(args.policies)} (random weights), torch {torch.__version__} CPU, {torch.get_num_threads()} "
          f"threads, {args.rate_hz:g} Hz robots asking every {args.replan_steps} steps, {args.duration_s:g} s "
          f"measured per cell after {args.warmup_s:g} s, {args.rounds} rounds ABAB, {args.transport} loopback, "
          f"{os.cpu_count()} CPUs, load {load_before} before, {_load()} after")  # fmt: skip
    print(report(rows, ratio_rows))
    verdict = {None: "not measured in this run", True: "holds", False: "does not hold"}[goal["holds"]]
    print(f"target (N = {goal['robots']} on {goal['policy']}: batched >= {goal['min_chunks_ratio']:g}x chunks/s "
          f"with a lower p99): {verdict}")  # fmt: skip
    if args.out:
        settings = {k: v for k, v in vars(args).items() if k not in ("out", "ipc_dir")}
        doc = {"command": " ".join(["python", "tools/bench_batching.py", *(argv or sys.argv[1:])]),
               "settings": settings, "torch_threads": torch.get_num_threads(), "cells": cells, "rows": rows,
               "ratios": ratio_rows, "target": goal}  # fmt: skip
        args.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
