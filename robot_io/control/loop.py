"""ControlLoop: call a tick function at a fixed rate by deadline, with overrun and jitter statistics.

Deadlines advance by exactly one period (`next += period`), never by a fixed sleep after the work, so
the rate does not drift with the tick's duration. A tick that ends after the next deadline is an
overrun: when it is late by less than a period the next tick starts at once; deadlines that passed
entirely are skipped (counted as missed ticks) and the step index still advances with time, so step
k always means "k periods after the start". Between ticks an optional `idle(until_ns)` callback may use
the slack (e.g. to receive replies with accurate timestamps); the final stretch is a spin.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from robot_io.control.clock import Clock, MonotonicClock
from robot_io.control.window import RecentWindow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tick:
    """One control tick: step `index` was due at `deadline_ns` and started at `start_ns` (clock time)."""

    index: int  # control step k: periods since the loop started (skipped deadlines included)
    deadline_ns: int  # scheduled start
    start_ns: int  # actual start


@dataclass(frozen=True)
class LoopSummary:
    """Timing of a finished loop."""

    rate_hz: float  # requested rate
    ticks: int  # ticks run
    duration_s: float  # from the first tick's start to the last tick's end
    overruns: int  # ticks that ended after the next deadline
    missed_ticks: int  # deadlines of the schedule skipped entirely because of overruns
    jitter_p50_ms: float  # |actual period - scheduled period|, median over the last stats_window ticks
    jitter_p99_ms: float  # same, 99th percentile
    jitter_max_ms: float  # same, maximum
    tick_p50_ms: float  # duration of the tick function, median over the last stats_window ticks
    tick_p99_ms: float  # same, 99th percentile


def _percentile_ms(window: RecentWindow, q: float) -> float:
    value = window.percentile(q)
    return 0.0 if value is None else value / 1e6


class ControlLoop:
    """Runs `tick(Tick) -> bool | None` at `rate_hz` until it returns False, `stop()`, the duration or max_ticks.
    Jitter and tick-duration statistics cover the last `stats_window` ticks (constant memory, see RecentWindow)."""

    def __init__(self, rate_hz: float, clock: Clock | None = None, stats_window: int = 100_000) -> None:
        if not rate_hz > 0:
            raise ValueError(f"ControlLoop.rate_hz must be > 0, got {rate_hz}")
        if stats_window < 1:
            raise ValueError(f"ControlLoop.stats_window must be >= 1, got {stats_window}")
        self.rate_hz = float(rate_hz)
        self.period_ns = round(1e9 / rate_hz)
        self.clock = clock or MonotonicClock()
        self._jitter_ns = RecentWindow(stats_window)
        self._tick_ns = RecentWindow(stats_window)
        self._stop = False
        self.ticks = self.overruns = self.missed_ticks = 0

    @property
    def period_s(self) -> float:
        return self.period_ns / 1e9

    def stop(self) -> None:
        """Ask the loop to return after the current tick (safe from inside the tick function)."""
        self._stop = True

    def run(
        self,
        tick: Callable[[Tick], bool | None],
        duration_s: float | None = None,
        max_ticks: int | None = None,
        idle: Callable[[int], None] | None = None,
    ) -> LoopSummary:
        """Run until `tick` returns False, `stop()`, `duration_s` of schedule or `max_ticks` ticks."""
        clock, period = self.clock, self.period_ns
        spin = getattr(clock, "spin_ns", 0)
        self._stop = False
        self.ticks = self.overruns = self.missed_ticks = 0
        self._jitter_ns.clear()
        self._tick_ns.clear()
        first = deadline = clock.now_ns()
        # the schedule: deadlines before end_ns, i.e. round(duration * rate) of them
        end_ns = None if duration_s is None else first + round(duration_s * 1e9) - period // 2
        index, prev = 0, None  # prev: (index, start_ns) of the previous tick
        last_end = first
        while not self._stop and (max_ticks is None or self.ticks < max_ticks):
            if end_ns is not None and deadline >= end_ns:
                break
            if idle is not None and clock.now_ns() < deadline - spin:
                idle(deadline - spin)
            clock.sleep_until(deadline)
            start = clock.now_ns()
            if prev is not None:
                self._jitter_ns.append(abs(start - prev[1] - (index - prev[0]) * period))
            prev = (index, start)
            keep_going = tick(Tick(index, deadline, start))
            last_end = clock.now_ns()
            self._tick_ns.append(last_end - start)
            self.ticks += 1
            deadline += period
            index += 1
            if last_end > deadline:
                self.overruns += 1
                skipped = (last_end - deadline) // period
                if skipped:
                    log.debug(
                        "tick %d overran by %.1f ms: skipping %d deadlines",
                        index - 1,
                        (last_end - deadline) / 1e6,
                        skipped,
                    )
                deadline += skipped * period
                index += skipped
                if end_ns is not None:  # deadlines past the schedule's end were never due
                    skipped -= min(skipped, max(0, (deadline - end_ns) // period))
                self.missed_ticks += skipped
            if keep_going is False:
                break
        return self.summary(duration_ns=last_end - first)

    def summary(self, duration_ns: int = 0) -> LoopSummary:
        jitter, work = self._jitter_ns, self._tick_ns
        return LoopSummary(
            rate_hz=self.rate_hz,
            ticks=self.ticks,
            duration_s=duration_ns / 1e9,
            overruns=self.overruns,
            missed_ticks=self.missed_ticks,
            jitter_p50_ms=_percentile_ms(jitter, 50),
            jitter_p99_ms=_percentile_ms(jitter, 99),
            jitter_max_ms=0.0 if jitter.max() is None else jitter.max() / 1e6,
            tick_p50_ms=_percentile_ms(work, 50),
            tick_p99_ms=_percentile_ms(work, 99),
        )
