"""One summary table with a column per mode, its rows named and printed as `vlash run`'s summary names them
(robot_io.run_summary.LABELS, every row defined in docs/METHODS.md "Run summary"), and what an injected latency
made of the chunk latency."""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from rich.table import Table
from rich.text import Text

from robot_io.run_summary import HOLD_WARNING_SHARE, LABELS
from robot_io.runner import RunResult, RunSummary

# the RunSummary fields the demo shows, in order: the holds with their split right below them, so the waits by
# design (each episode's first chunk, sync's wait for every chunk) read as the part of the holds they are
FIELDS = (
    "episodes",
    "successes",
    "requests",
    "chunks",
    "ttfa_p50_ms",
    "latency_p50_ms",
    "latency_p99_ms",
    "delay_steps",
    "missed_deadlines",
    "watchdog_holds",
    "waiting_steps",
    "unexpected_holds",
    "dropped",
    "errors",
    "timeouts",
    "jitter_p99_ms",
    "overruns",
)


def _cell(summary: RunSummary, name: str) -> Text:
    """The value as `vlash run` prints it; the holds not by design green when there are none, red above the share
    `vlash run` calls out."""
    text = Text(summary.cell(name))
    if name == "unexpected_holds":
        text.stylize("bold red" if summary.unexpected_share > HOLD_WARNING_SHARE else "green" if not
                     summary.unexpected_holds else "")  # fmt: skip
    return text


def summary_table(results: Mapping[str, RunResult], title: str = "vlash demo") -> Table:
    table = Table(title=title)
    table.add_column("metric")
    for mode in results:
        table.add_column(mode, justify="right")
    summaries = [r.summary for r in results.values()]
    for name in FIELDS:
        table.add_row(LABELS[name], *(_cell(s, name) for s in summaries))
    return table


def injected_p50_ms(result: RunResult) -> float | None:
    """The median emulated device time of the run's chunks (the server's `injected_ms`), None without one."""
    injected = [r.timing_ms["injected_ms"] for r in result.records if "injected_ms" in r.timing_ms]
    return statistics.median(injected) if injected else None


def injection_note(results: Mapping[str, RunResult], inject_ms: float) -> str:
    """One line: each mode's chunk latency p50 as the injected wait plus the policy's own time, and why the latency
    can rise by more than the milliseconds injected (docs/METHODS.md, "Run summary")."""
    parts = []
    for mode, result in results.items():
        latency, injected = result.summary.latency_p50_ms, injected_p50_ms(result)
        if latency is not None and injected is not None:
            parts.append(f"{mode} {injected:.0f} + {latency - injected:.0f} ms")
    split = ", ".join(parts) if parts else "no chunk finished"
    return (f"chunk latency p50 = injected + the policy's own time: {split} (the {inject_ms:g} ms are spread over the "
            "prefill and each denoise step, fewer when a chunk stops early; a rise beyond them is the policy's own "
            "time, which each wait can slow, as it lets the server's core go idle)")  # fmt: skip
