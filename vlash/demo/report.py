"""One summary table with a column per mode."""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table

from robot_io.runner import RunResult

# (RunSummary field, row label); times in ms
ROWS = (
    ("episodes", "episodes"),
    ("successes", "successes"),
    ("requests", "requests"),
    ("chunks", "chunks run"),
    ("ttfa_p50_ms", "first needed action p50 ms"),
    ("latency_p50_ms", "chunk latency p50 ms"),
    ("latency_p99_ms", "chunk latency p99 ms"),
    ("delay_steps", "delay d (steps)"),
    ("missed_deadlines", "missed deadlines"),
    ("waiting_steps", "waiting steps (by design)"),
    ("watchdog_holds", "watchdog holds"),
    ("unexpected_holds", "of which not by design"),
    ("dropped", "dropped (superseded)"),
    ("errors", "errors"),
    ("timeouts", "timeouts"),
    ("jitter_p99_ms", "loop jitter p99 ms"),
    ("overruns", "loop overruns"),
)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def summary_table(results: Mapping[str, RunResult], title: str = "vlash demo") -> Table:
    table = Table(title=title)
    table.add_column("metric")
    for mode in results:
        table.add_column(mode, justify="right")
    summaries = [r.summary.as_dict() for r in results.values()]
    for key, label in ROWS:
        table.add_row(label, *(_cell(s[key]) for s in summaries))
    return table
