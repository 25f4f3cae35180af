"""Progress of long jobs (train, eval, bench, export, quantize, convert): a rich bar on a terminal, plain lines
anywhere else.

A rich bar draws nothing when its stream is not a terminal (a log file, CI, `nohup`, a pipe), so a 16-minute
training run said nothing until it ended. There the same updates become lines like

    vlash train: training 450/1800 (25%) elapsed 4:02 eta 12:06 loss 0.081

one when another `every_s` seconds or another `every_fraction` of the work has passed, and one at the end.
Progress goes to stderr: stdout stays for results (tables, --json).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

Update = Callable[..., None]  # update(completed, info=""): `completed` units of `total` done so far


def clock_text(seconds: float) -> str:
    """0:42, 12:06, 1:02:03."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class ProgressLines:
    """Plain progress lines for a stream that is not a terminal.

    `counted`: show "done/total" (steps, episodes); else only the percentage (a fraction of 1.0 of work)."""

    def __init__(
        self,
        label: str,
        total: float,
        write: Callable[[str], None],
        every_s: float = 10.0,
        every_fraction: float = 0.1,
        counted: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.total, self.write = label, float(total), write
        self.every_s, self.every_fraction, self.counted, self.clock = every_s, every_fraction, counted, clock
        self.start = self._last_time = clock()
        self._last_bucket = 0  # every_fraction steps reported so far
        self._finished = False

    def update(self, completed: float, info: str = "") -> None:
        if self._finished:
            return
        now = self.clock()
        fraction = min(1.0, completed / self.total) if self.total > 0 else 1.0
        bucket = math.floor(fraction / self.every_fraction + 1e-9)
        done = fraction >= 1.0
        if not (done or bucket > self._last_bucket or now - self._last_time >= self.every_s):
            return
        self._last_bucket, self._last_time, self._finished = bucket, now, done
        self.write(self.line(completed, fraction, now, info))

    def line(self, completed: float, fraction: float, now: float, info: str) -> str:
        elapsed = now - self.start
        count = f"{completed:g}/{self.total:g} " if self.counted else ""
        eta = f" eta {clock_text(elapsed * (1 - fraction) / fraction)}" if 0 < fraction < 1 else ""
        tail = f" {info}" if info else ""
        return f"{self.label} {count}({100 * fraction:.0f}%) elapsed {clock_text(elapsed)}{eta}{tail}"


def is_terminal(stream: TextIO) -> bool:
    from rich.console import Console  # extra: server

    return Console(file=stream).is_terminal  # rich's rule (honours FORCE_COLOR / TTY_COMPATIBLE)


@contextmanager
def progress(
    label: str,
    total: float,
    enabled: bool = True,
    stream: TextIO | None = None,
    counted: bool = True,
    every_s: float = 10.0,
    transient: bool = False,
) -> Iterator[Update]:
    """Yield `update(completed, info="")`: a rich bar on `stream` (default stderr) when it is a terminal, else
    `ProgressLines` written to it; nothing when not `enabled`."""
    stream = stream if stream is not None else sys.stderr
    if not enabled:
        yield lambda completed, info="": None
        return
    if not is_terminal(stream):
        lines = ProgressLines(label, total, lambda text: print(text, file=stream, flush=True), every_s, counted=counted)
        yield lines.update
        return
    from rich.console import Console  # extra: server
    from rich.progress import (  # extra: server
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    amount = (MofNCompleteColumn(),) if counted else (TextColumn("{task.percentage:>3.0f}%"),)
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), *amount, TextColumn("{task.fields[info]}"),
               TimeElapsedColumn(), TimeRemainingColumn())  # fmt: skip
    with Progress(*columns, console=Console(file=stream), transient=transient) as bar:
        task = bar.add_task(label, total=total, info="")
        yield lambda completed, info="": bar.update(task, completed=completed, info=info)
