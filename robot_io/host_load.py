"""The load a timing was taken under, printed beside every timing: this host's 1-minute load average, the cores this
process may run on and the threads the timed work uses (`vlash bench`, the latency rows of `vlash run` and `vlash
demo`, examples/stream_actions.py), with one warning line when other work competed for the cores.

On a shared machine a timing can be several times its quiet figure without a word: `vlash bench` on every core of a
loaded 2-core box gave 1.6-4x docs/BENCHMARKS.md's figures. The load average counts the threads that are running or
waiting for a core, averaged over a minute; when it exceeds the cores left beside the timed work's own threads, other
work is taking cores the timed work wants, and its timings come out inflated. Sample it (`HostLoad.now`) before the
timed work starts, so that the average is mostly the other processes' demand and not the work's own.

Standard library only: the robot side prints it too.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. under taskset or a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows: no affinity call
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The host's 1-minute load average; None where the OS keeps none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass(frozen=True)
class HostLoad:
    """What a timing shares the host with."""

    load_1m: float | None  # the host's 1-minute load average when sampled; None: unknown (no load average here)
    cores: int  # cores this process may run on
    threads: int  # threads of the timed work (torch's intra-op threads; 1 for a control loop)
    what: str = "torch threads"  # what `threads` counts, as printed

    @classmethod
    def now(cls, threads: int, what: str = "torch threads") -> HostLoad:
        """The load now, for timed work on `threads` threads (sample before the work starts: module doc)."""
        return cls(load_average(), available_cores(), threads, what)

    @property
    def free_cores(self) -> int:
        """Cores left beside the timed work's own threads."""
        return max(0, self.cores - self.threads)

    @property
    def contended(self) -> bool:
        """Other work wants more cores than the timed work leaves free: its timings are inflated."""
        return self.load_1m is not None and self.load_1m > self.free_cores

    def line(self) -> str:
        """One line for beside a timing: "host load 0.42 (1-min average) on 2 cores; torch threads: 1"."""
        load = "unknown" if self.load_1m is None else f"{self.load_1m:.2f}"
        return f"host load {load} (1-min average) on {self.cores} cores; {self.what}: {self.threads}"

    def warning(self) -> str | None:
        """One line when the host is contended (`contended`), else None."""
        if not self.contended:
            return None
        return (f"warning: the host's load average {self.load_1m:.2f} exceeds the cores left beside this work "
                f"({self.cores} cores - {self.threads} {self.what}): other work shares the cores, so these timings "
                "will be inflated; compare them only with timings taken under the same load")  # fmt: skip

    def lines(self) -> list[str]:
        """`line()`, then the warning when there is one."""
        return [self.line()] + ([] if (warning := self.warning()) is None else [warning])

    def as_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)
