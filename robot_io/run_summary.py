"""RunSummary: the numbers a run reports, their printed names, and whether the robot got usable chunks at all.

LABELS names every number once, for every printer (`vlash run`'s summary, `vlash demo`'s table); each label is
defined in SUMMARY_DOC. The watchdog's holds split into the waits by design (an episode's first chunk, sync's
wait for every chunk) and the holds that are not by design (missed deadlines, a lost link, bad actions): only the
second are trouble. Above HOLD_WARNING_SHARE of the ticks they are called out; above --max-hold-share the run
failed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MAX_HOLD_SHARE = 0.5  # default: a run whose watchdog held more than half its ticks (not by design) failed
HOLD_WARNING_SHARE = 0.10  # a run whose watchdog held more than this share of its ticks (not by design) is called out
SUMMARY_DOC = 'docs/METHODS.md, "Run summary"'  # where every label is defined
ROWS_NOTE = f"(every row is defined in {SUMMARY_DOC})"  # under every printed summary

# RunSummary field -> its name in print, in the order printed (mode and rate go into the title)
LABELS: dict[str, str] = {
    "duration_s": "duration s",
    "ticks": "ticks",
    "episodes": "episodes",
    "successes": "successes",
    "requests": "requests",
    "chunks": "chunks run",
    "ttfa_p50_ms": "first needed action p50 ms",
    "latency_p50_ms": "chunk latency p50 ms",
    "latency_p99_ms": "chunk latency p99 ms",
    "delay_steps": "delay d (steps)",
    "missed_deadlines": "missed deadlines",
    "watchdog_holds": "watchdog holds",
    "waiting_steps": "of which waiting (by design)",
    "unexpected_holds": "of which not by design",
    "unsent_ticks": "holds with nothing sent",
    "stall_holds": "stall watchdog holds",
    "clamped": "clamped actions",
    "dropped": "dropped (superseded)",
    "errors": "errors",
    "timeouts": "timeouts",
    "too_late": "too late",
    "stale_replies": "stale replies",
    "link_losses": "link losses",
    "link_lost_steps": "ticks with the link lost",
    "observation_errors": "observation errors",
    "overruns": "loop overruns",
    "missed_ticks": "loop skipped ticks",
    "jitter_p50_ms": "loop jitter p50 ms",
    "jitter_p99_ms": "loop jitter p99 ms",
}


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

    def cell(self, name: str) -> str:
        """Field `name` as printed: "-" for none, one decimal for times, and the holds not by design with their share
        of the ticks ("5 (2%)")."""
        value = getattr(self, name)
        if value is None:
            return "-"
        if name == "unexpected_holds":
            return f"{value} ({self.unexpected_share:.0%})"
        return f"{value:.1f}" if isinstance(value, float) else str(value)

    @property
    def unexpected_share(self) -> float:
        """The share of the ticks the watchdog held not by design (0 when no tick ran)."""
        return self.unexpected_holds / self.ticks if self.ticks else 0.0

    def hold_warning(self, share: float = HOLD_WARNING_SHARE) -> str | None:
        """One line when the watchdog held more than `share` of the ticks not by design, else None."""
        if self.ticks == 0 or self.unexpected_share <= share:
            return None
        return self._not_by_design(share)

    def _not_by_design(self, limit: float) -> str:
        return (f"the watchdog held {self.unexpected_holds} of {self.ticks} ticks ({self.unexpected_share:.0%}, more "
                f"than {limit:.0%}) not by design: {self.missed_deadlines} missed deadlines, {self.link_lost_steps} "
                "ticks with the link lost")  # fmt: skip

    def unusable_reason(self, max_hold_share: float = MAX_HOLD_SHARE) -> str | None:
        """Why the robot got no usable chunks, in one line, or None: no tick ran; no chunk ever ran; or the watchdog
        held more than `max_hold_share` of the ticks not by design (module doc)."""
        if self.ticks == 0:
            return "no control tick ran"
        if self.chunks == 0:
            return (f"no chunk ran in {self.ticks} ticks ({self.watchdog_holds} watchdog holds; {self.requests} "
                    f"requests: {self.timeouts} timed out, {self.errors} errors, {self.dropped} dropped)")  # fmt: skip
        if self.unexpected_share > max_hold_share:
            return self._not_by_design(max_hold_share)
        return None
