"""`vlash demo`: serve the shipped simulation policy on the CPU in a child process and drive the simulated arm
through it over ZeroMQ at 30 Hz; print a summary (the rows of `vlash run`'s, defined in docs/METHODS.md "Run
summary") and write a plot. `--inject-latency-ms MS` compares execution modes (sync, vlash, faster) under a slower
server, side by side, and says how much of each chunk latency was injected.

    vlash demo                                   # ~20 s, demo.png (replaced only if an earlier vlash demo wrote it)
    vlash demo --inject-latency-ms 150           # sync vs vlash vs faster, 20 s each
    vlash demo --policy pi05-tiny --random-weights --duration-s 5
"""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.text import Text

from robot_io.executors import EXECUTION_MODES
from robot_io.host_load import HostLoad
from robot_io.protocol.errors import RobotIOError
from robot_io.rerun_trace import RerunError, RerunRecording
from robot_io.run_summary import ROWS_NOTE
from vlash.cli.command import Command
from vlash.cli.cpu_threads import server_threads
from vlash.cli.flags import ConfigFlags
from vlash.cli.preflight import check_output_file
from vlash.cli.run_cmd import status_line
from vlash.demo.plot import plot_demo, written_by_demo
from vlash.demo.report import injection_note, summary_table
from vlash.demo.server_process import ServerProcess
from vlash.demo.session import DemoConfig, run_modes
from vlash.errors import CheckpointError, ConfigError
from vlash.policies.names.shipped import shipped_policy_dir
from vlash.server.config import ServerConfig

SHIPPED = "pi05-tiny-sim"
COMPARED_MODES = ("sync", "vlash", "faster")


@dataclass(frozen=True)
class DemoOptions:
    """The policy served, and what the demo writes."""

    policy: str | None = None  # (its help: DEMO_OPTIONS)
    checkpoint: Path | None = field(default=None, metadata={"metavar": "DIR"})  # policy directory
    random_weights: bool = False  # --policy names a preset: random weights
    modes: str | None = None  # comma-separated execution modes
    threads: int | None = None  # server torch threads (default: all cores but one)
    device: str = "cpu"  # server device (cpu, cuda, auto)
    # PNG to write (a file there is replaced only if vlash demo wrote it)
    plot: Path = field(default=Path("demo.png"), metadata={"metavar": "FILE.png"})
    # also write a rerun recording, each mode under its name (`rerun FILE.rrd` replays it; the [viz] extra)
    record: Path | None = field(default=None, metadata={"metavar": "FILE.rrd"})


DEMO_OPTIONS = ConfigFlags(
    DemoOptions,
    "policy checkpoint random_weights modes",
    title="the demo",
    help={"policy": f"shipped policy name (default {SHIPPED}), or a preset with --random-weights"},
    notes={
        "modes": f"({', '.join(EXECUTION_MODES)}); default: vlash, or {','.join(COMPARED_MODES)} with "
        "--inject-latency-ms"
    },  # fmt: skip
)
DEMO_FLAGS = ConfigFlags(DemoConfig, "task seed rate_hz duration_s execution_horizon", title="the demo")
SERVER_FLAGS = ConfigFlags(ServerConfig, "inject_latency_ms steps", title="the server")  # passed on to `vlash serve`
SERVER_OPTIONS = ConfigFlags(DemoOptions, "device threads", title="the server")
OUTPUT_FLAGS = ConfigFlags(DemoOptions, "plot record", title="outputs")
RENAMED = {
    "--fps": "--rate-hz",
    "--duration": "--duration-s",
    "--horizon": "--execution-horizon",
    "--inject-latency": "--inject-latency-ms",
}
COMMAND = Command(
    "demo",
    "serve the shipped policy and drive the simulated arm through it, with a plot",
    "Serve the shipped simulation policy in a child process and drive the simulated arm through it over ZeroMQ; "
    "print a summary (the rows of `vlash run`'s) and write a plot. --inject-latency-ms compares execution modes "
    "under a slower server.",
    (DEMO_OPTIONS, DEMO_FLAGS, SERVER_FLAGS, SERVER_OPTIONS, OUTPUT_FLAGS),
    RENAMED,
    exclusive=(("policy", "checkpoint"),),
)


def parse_modes(args: argparse.Namespace) -> list[str]:
    if args.modes is None:
        return list(COMPARED_MODES) if args.inject_latency_ms > 0 else ["vlash"]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in EXECUTION_MODES]
    if bad or not modes:
        raise ConfigError(f"--modes: {bad or 'none given'}; choose from {', '.join(EXECUTION_MODES)}")
    return modes


def serve_args(args: argparse.Namespace) -> list[str]:
    """`vlash serve` arguments for the child process (the policy is resolved here, for a clear error)."""
    if args.random_weights:
        if args.policy is None:
            raise ConfigError("--random-weights needs --policy PRESET (e.g. pi05-tiny)")
        source = ["--policy", args.policy, "--random-weights"]
    elif args.checkpoint is not None:
        if not args.checkpoint.is_dir():
            raise ConfigError(f"--checkpoint {str(args.checkpoint)!r} is not a directory")
        source = ["--checkpoint", str(args.checkpoint)]
    else:
        try:
            source = ["--checkpoint", str(shipped_policy_dir(args.policy or SHIPPED))]
        except CheckpointError as exc:
            raise CheckpointError(
                f"{exc}. Train it (README: vlash train), or try `vlash demo --policy pi05-tiny --random-weights` "
                "(random weights: the arm moves, without purpose) or --checkpoint DIR"
            ) from None
    threads = server_threads(args.threads)  # the rule vlash serve uses: all cores but one
    settings = [f"--{name.replace('_', '-')}={value}" for name, value in SERVER_FLAGS.given(args).items()]
    return [*source, "--device", args.device, "--threads", str(threads), *settings]


def run(args: argparse.Namespace) -> int:
    config = DEMO_FLAGS.build(args)
    latency_ms = SERVER_FLAGS.build(args).inject_latency_ms  # the server's settings, checked here first
    modes = parse_modes(args)
    check_output_file(args.plot, "--plot")  # written at the end: a directory in its way is said now
    replacing = check_plot(args.plot)
    if args.record is not None:
        check_output_file(args.record, "--record")
    server_args = serve_args(args)  # a bad --checkpoint is said before anything else is printed
    console = Console()
    if replacing:
        console.print(
            f"vlash demo: {args.plot} holds an earlier vlash demo's plot; this run replaces it", soft_wrap=True
        )
    console.print(f"vlash demo: starting the policy server ({' '.join(server_args[:2])}) ...", soft_wrap=True)
    with ExitStack() as stack:
        recording = None if args.record is None else stack.enter_context(_recording(args.record))
        server = stack.enter_context(ServerProcess(server_args))
        endpoint = server.start()
        host = HostLoad.now(server_threads(args.threads), "server torch threads")  # before the runs: others' load
        console.print(server.banner, soft_wrap=True)
        console.print(f"driving sim:{config.task} at {config.rate_hz:g} Hz, {config.duration_s:g} s per mode: "
                      f"{', '.join(modes)}")  # fmt: skip
        try:
            with Live(Text("connecting..."), console=console, transient=True, refresh_per_second=8) as live:

                def show(mode: str, status: dict) -> None:
                    live.update(Text(f"{mode:>6}  ") + status_line(status))

                results = run_modes(endpoint, modes, config, show, recording)
        except RobotIOError as exc:
            raise ConfigError(f"{type(exc).__name__}: {exc}") from None
    latency = f", +{latency_ms:g} ms injected" if latency_ms else ""
    title = f"vlash demo: sim:{config.task} at {config.rate_hz:g} Hz{latency}"
    console.print(summary_table(results, title))
    console.print(ROWS_NOTE, soft_wrap=True)
    for line in host.lines():  # the host's load beside the latencies, a warning when it inflated them
        console.print(line, soft_wrap=True)
    if latency_ms:
        console.print(injection_note(results, latency_ms), soft_wrap=True)
    console.print(f"wrote {plot_demo(results, args.plot, title)}")
    if args.record is not None:
        console.print(f"wrote {args.record} (rerun {args.record})")
    return 0


def check_plot(path: Path) -> bool:
    """Whether --plot replaces a plot an earlier vlash demo wrote; a file there that vlash demo did not write (the
    user's, or an older vlash's, which did not mark its plots) is refused: it is never replaced."""
    if not path.exists():
        return False
    if not written_by_demo(path):
        raise ConfigError(
            f"--plot {str(path)!r} exists and vlash demo did not write it, so it is not replaced: move it, or give "
            "another --plot (e.g. --plot demo-2.png)"
        )
    return True


def _recording(path: Path) -> RerunRecording:
    try:
        return RerunRecording("vlash demo", path=path)
    except (RerunError, OSError) as exc:  # no rerun, a file that cannot be opened
        raise ConfigError(str(exc)) from None
