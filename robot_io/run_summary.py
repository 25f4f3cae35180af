"""RunSummary: the numbers a run reports, and whether the robot got usable chunks at all."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MAX_HOLD_SHARE = 0.5  # default: a run whose watchdog held more than half its ticks (not by design) failed


@dataclass(frozen=True)
class RunSummary:
    """The numbers a run reports (times in ms; steps are control steps). Percentiles cover the most recent
    RunConfig.stats_window chunks; counts cover the whole run."""

    mode: str
    rate_hz: float
    duration_s: float
    ticks: int
    requests: int
    chunks: int  # chunks that took over
    ttfa_p50_ms: float | None  # request tick -> first needed action final (median over chunks)
    latency_p50_ms: float | None  # request tick -> final message
    latency_p99_ms: float | None
    delay_steps: int  # final online estimate of d
    missed_deadlines: int  # ticks where the running chunk had no valid action (starved)
    waiting_steps: int  # ticks spent waiting by design (first chunk, sync) while the link was healthy
    watchdog_holds: int  # ticks that sent the watchdog fallback (waiting + missed + link lost + bad actions)
    unexpected_holds: int  # of which not waiting by design: missed deadlines, waits on a lost link, bad actions
    unsent_ticks: int  # of which nothing could be sent (no command yet, hold unknown): the robot's controller held
    stall_holds: int  # hold commands the stall watchdog sent from its thread while the loop was stalled
    clamped: int  # ticks whose action safety changed
    overruns: int
    missed_ticks: int
    jitter_p50_ms: float
    jitter_p99_ms: float
    errors: int
    dropped: int
    timeouts: int
    too_late: int  # replies (or silences) that outlived every usable index of their chunk
    stale_replies: int
    link_losses: int  # times the link counted as lost (no reply for ExecutorConfig.link_timeout_s while owed)
    link_lost_steps: int  # ticks while it was lost
    observation_errors: int
    episodes: int  # simulated episodes finished
    successes: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def unusable_reason(self, max_hold_share: float = MAX_HOLD_SHARE) -> str | None:
        """Why the robot got no usable chunks, in one line, or None: no tick ran; no chunk ever ran; or the watchdog
        held more than `max_hold_share` of the ticks besides the waits by design (an episode's first chunk, sync)."""
        if self.ticks == 0:
            return "no control tick ran"
        if self.chunks == 0:
            return (f"no chunk ran in {self.ticks} ticks ({self.watchdog_holds} watchdog holds; {self.requests} "
                    f"requests: {self.timeouts} timed out, {self.errors} errors, {self.dropped} dropped)")  # fmt: skip
        share = self.unexpected_holds / self.ticks
        if share > max_hold_share:
            return (f"the watchdog held {self.unexpected_holds} of {self.ticks} ticks ({share:.0%}, more than "
                    f"{max_hold_share:.0%}) besides the waits by design: {self.missed_deadlines} missed deadlines, "
                    f"{self.link_lost_steps} ticks with the link lost")  # fmt: skip
        return None
