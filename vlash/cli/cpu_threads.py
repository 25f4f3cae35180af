"""How many CPU threads torch uses unless told: one rule for `vlash serve`, `vlash demo`, `vlash bench` and
examples/stream_actions.py.

torch's own default is every core. When the robot process runs on the same machine (the simulator, `vlash run`,
a LeRobot arm on a laptop), a server using every core starves it: on a 2-core box a user's control loop got 0
chunks and the watchdog held 300 of 300 ticks. All cores but one leaves the robot one to itself. A timing holds up
under load the same way: on every core, one busy process beside it made a pi05-small chunk 3.5x slower, on all
cores but one 0.91-1.11x (docs/BENCHMARKS.md, "Steady on a shared machine"); `vlash bench` on every core of a loaded
box gave 1.6-4x the documented figures. What a timing shared the host with is printed beside it
(robot_io.host_load)."""

from __future__ import annotations

from robot_io.host_load import available_cores

RULE = "all CPU cores but one, at least 1: the robot process on the same machine keeps a core"


def server_threads(requested: int | None = None, cores: int | None = None) -> int:
    """`requested` if given, else all cores but one (at least 1)."""
    if requested is not None:
        return requested
    return max(1, (cores if cores is not None else available_cores()) - 1)


__all__ = ["RULE", "available_cores", "server_threads"]
