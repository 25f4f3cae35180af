"""What `vlash run` prints: the live status (in place on a terminal, else a plain line every few seconds), the
summary with the host's load beside its timings (robot_io.host_load), the files written, how a stopped run left
the robot and any trouble, and the exit status that goes with them. Robot side only, like `vlash run`."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from robot_io.host_load import HostLoad
from robot_io.run_summary import LABELS, ROWS_NOTE
from robot_io.runner import RunResult, RunSummary
from robot_io.stop_signals import StopRequest

PROGRESS_EVERY_S = 5.0  # a plain progress line this often: the status when stdout is no terminal, the server wait
CONTROL_THREADS = "control-loop threads"  # what the run's own threads are, beside the host's load


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


def summary_text(summary: RunSummary, host: HostLoad | None = None) -> str:
    """The summary as aligned plain text: a title, one `label  value` row per field (LABELS), what the host was
    doing when the run began (`host`: its load, cores and threads, and a warning when the timings are inflated by
    other work), and where the rows are defined (ROWS_NOTE)."""
    rows = [(label, summary.cell(name)) for name, label in LABELS.items()]
    label = max(len(k) for k, _ in rows)
    width = max(len(v) for _, v in rows)
    title = f"vlash run: {summary.mode} at {summary.rate_hz:g} Hz"
    rows_text = (f"  {k:<{label}}  {v:>{width}}" for k, v in rows)
    host_text = [] if host is None else [f"  {line}" for line in host.lines()]
    return "\n".join([title, *rows_text, *host_text, f"  {ROWS_NOTE}"])


def report(result: RunResult, traces: list, stop: StopRequest, max_hold_share: float,
           host: HostLoad | None = None) -> int:  # fmt: skip
    """Print the summary (with `host`'s load beside its timings), the files written, how a stopped run left the robot
    and any trouble; the exit status (1 when the robot got no usable chunks, or a --record-dataset recording is not
    where it was asked for: kept in DIR.partial, or never written)."""
    summary = result.summary
    print(summary_text(summary, host))
    lost_dataset = False
    for trace in traces:
        if getattr(trace, "outcome", None):  # a dataset: what it holds, or why it was not written
            lost_dataset = lost_dataset or trace.error is not None
            print(trace.outcome, file=sys.stderr if trace.error is not None else sys.stdout)
        elif trace.path is not None:  # --display alone writes nothing
            print(f"wrote {trace.path}" if trace.error is None else f"{trace.path} is incomplete: {trace.error}")
    if result.stopped:
        print(f"vlash run: stopped by {stop.name} after {summary.duration_s:.1f} s ({summary.ticks} "
              f"ticks); the robot {result.left}")  # fmt: skip
    if (reason := summary.unusable_reason(max_hold_share)) is not None:
        print(f"vlash run: the robot did not get usable chunks: {reason}", file=sys.stderr)
    elif (warning := summary.hold_warning()) is not None:
        print(f"vlash run: warning: {warning}", file=sys.stderr)
    if result.stopped:
        return stop.exit_code or 130
    return 1 if reason is not None or lost_dataset else 0
