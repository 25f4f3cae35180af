"""`vlash run --server tcp://HOST:5555 --robot sim:reach --mode vlash --fps 30 --duration 20`: drive a robot
with a remote policy. Robot side only: robot_io and the standard library, never torch or rich (it runs on the
robot computer, where only numpy, pyzmq, msgpack and pyyaml are installed).

    vlash run --server tcp://gpu-box:5555 --robot lerobot:so101_follower --robot-config configs/robots/so101.yaml \\
        --camera base_0_rgb=front --camera left_wrist_0_rgb=wrist --camera right_wrist_0_rgb=none
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from robot_io.client import PolicyClient
from robot_io.errors import RobotIOError
from robot_io.executors import EXECUTION_MODES, ExecutorConfig
from robot_io.executors.images import parse_camera_map
from robot_io.protocol.curve import CurveClientKeys
from robot_io.robots import make_robot
from robot_io.runner import RunConfig, RunSummary, run_robot
from vlash.errors import ConfigError

PROGRESS_EVERY_S = 5.0  # a plain progress line this often when stdout is not a terminal


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a robot (or the simulator) under a remote policy server")
    p.add_argument("--server", required=True, help="policy server endpoint, e.g. tcp://127.0.0.1:5555")
    p.add_argument(
        "--robot",
        default="sim:reach",
        help="robot spec: sim:<task>[:<seed>] (reach, track, whack, ...) or lerobot:<type> (lerobot:so101_follower)",
    )
    p.add_argument(
        "--robot-config",
        type=Path,
        default=None,
        help="lerobot:<type>: YAML of LeRobot's config fields (port, id, cameras)",
    )
    p.add_argument(
        "--camera",
        action="append",
        default=[],
        metavar="POLICY=ROBOT",
        help="feed policy camera POLICY from robot camera ROBOT (repeatable; POLICY=none leaves it out, masked); "
        "needed whenever the names differ",
    )
    p.add_argument("--mode", default="vlash", choices=EXECUTION_MODES, help="chunk execution mode")
    p.add_argument("--fps", type=float, default=30.0, help="control rate [Hz]")
    p.add_argument("--duration", type=float, default=20.0, help="run length [s]")
    p.add_argument("--horizon", type=int, default=10, help="s: control steps of a chunk before the next takes over")
    p.add_argument("--quantize", type=int, default=1, help="q: execute every q-th action")
    p.add_argument("--delay", type=int, default=3, help="d0: initial delay estimate in control steps")
    p.add_argument("--fixed-delay", action="store_true", help="keep d = --delay instead of measuring it")
    p.add_argument("--prompt", default="", help="task instruction (default: the simulated task's)")
    p.add_argument("--max-step", type=float, default=None, help="largest joint change per tick (robot units)")
    p.add_argument("--on-missing", choices=("hold", "stop"), default="hold", help="watchdog fallback")
    p.add_argument("--timeout", type=float, default=5.0, help="handshake / reply timeout [s]")
    p.add_argument("--server-key", type=Path, default=None, help="CurveZMQ: the server's public key file")
    p.add_argument("--client-key", type=Path, default=None, help="CurveZMQ: this client's secret key file")
    p.add_argument("--json", type=Path, default=None, help="write the summary and chunk records here")


def build_config(args: argparse.Namespace) -> RunConfig:
    try:
        executor = ExecutorConfig(
            mode=args.mode,
            execution_horizon=args.horizon,
            quantization=args.quantize,
            initial_delay=args.delay,
            adapt_delay=not args.fixed_delay,
            prompt=args.prompt,
        )
        return RunConfig(
            executor,
            rate_hz=args.fps,
            duration_s=args.duration,
            on_missing=args.on_missing,
            max_step=args.max_step,
            camera_map=parse_camera_map(args.camera),
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def status_line(status: dict) -> str:
    latency = status["latency_ms"]
    lat = "-" if latency is None else f"{latency:.0f} ms"
    return (
        f"step {status['step']:>6}  chunks {status['chunks']:>4}  latency {lat:>7}  d {status['delay_steps']}  "
        f"missed {status['missed']}  holds {status['holds']}  overruns {status['overruns']}  "
        f"episodes {status['successes']}/{status['episodes']}"
    )


class StatusPrinter:
    """The live status: rewritten in place (\\r) on a terminal, else a plain line every `every_s` seconds."""

    def __init__(self, stream: TextIO | None = None, every_s: float = PROGRESS_EVERY_S) -> None:
        self.stream = stream or sys.stdout
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s, self._next, self._width = every_s, 0.0, 0

    def __call__(self, status: dict[str, Any]) -> None:
        line = status_line(status)
        if self.tty:
            self.stream.write("\r" + line.ljust(self._width))
            self._width = max(self._width, len(line))
        elif (now := time.monotonic()) >= self._next:
            self._next = now + self.every_s
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the in-place line (a terminal) so what follows starts on its own line."""
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


def summary_text(summary: RunSummary) -> str:
    """The summary as aligned plain text: a title, then one `metric  value` row per field."""
    rows = []
    for key, value in summary.as_dict().items():
        if key in ("mode", "rate_hz"):
            continue
        text = "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)
        rows.append((key.replace("_", " "), text))
    label = max(len(k) for k, _ in rows)
    width = max(len(v) for _, v in rows)
    title = f"vlash run: {summary.mode} at {summary.rate_hz:g} Hz"
    return "\n".join([title, *(f"  {k:<{label}}  {v:>{width}}" for k, v in rows)])


def _curve(args: argparse.Namespace) -> CurveClientKeys | None:
    if (args.server_key is None) != (args.client_key is None):
        raise ConfigError("CurveZMQ needs both --server-key (server public) and --client-key (client secret)")
    if args.server_key is None:
        return None
    return CurveClientKeys.from_files(args.client_key, args.server_key)


def run(args: argparse.Namespace) -> int:
    config = build_config(args)
    try:
        robot = make_robot(args.robot, args.robot_config)
    except (RobotIOError, ValueError) as exc:  # unknown spec or type, bad config file, LeRobot not installed
        raise ConfigError(str(exc)) from None
    client = PolicyClient(
        args.server, timeout_s=args.timeout, client_name=f"vlash-run:{args.robot}", curve=_curve(args)
    )
    printer = StatusPrinter()
    try:
        result = run_robot(robot, client, config, status=printer)
    except RobotIOError as exc:  # no server, protocol mismatch, robot/policy mismatch, camera trouble at setup
        raise ConfigError(f"{type(exc).__name__}: {exc}") from None
    finally:
        printer.close()
        client.close()
    print(summary_text(result.summary))
    if args.json:
        records = [vars(r) for r in result.records]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": result.summary.as_dict(), "chunks": records}, indent=1))
        print(f"wrote {args.json}")
    return 0
