"""How many CPU threads the policy server's torch uses unless told: one rule for `vlash serve` and `vlash demo`.

torch's own default is every core. When the robot process runs on the same machine (the simulator, `vlash run`,
a LeRobot arm on a laptop), a server using every core starves it: on a 2-core box a user's control loop got 0
chunks and the watchdog held 300 of 300 ticks. All cores but one leaves the robot one to itself."""

from __future__ import annotations

import os

RULE = "all CPU cores but one, at least 1: the robot process on the same machine keeps a core"


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. under taskset or a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows: no affinity call
        return os.cpu_count() or 1


def server_threads(requested: int | None = None, cores: int | None = None) -> int:
    """`requested` if given, else all cores but one (at least 1)."""
    if requested is not None:
        return requested
    return max(1, (cores if cores is not None else available_cores()) - 1)
