"""tools/bench_vs_lerobot.py's rows: per-row chunk p50 / p99 and the per-round ratio to its LeRobot reference."""

from __future__ import annotations

import numpy as np
from paired_rounds import median_interval

UNITS = {"model": "normalized", "bf16": "normalized", "pipeline": "robot units"}


def summarize(times: dict[str, list[float]], refs: dict[str, tuple[str, str]], diffs: dict[str, float]) -> list[dict]:
    """One row per timed chunk; refs: {row: (its reference row, its kind: model / pipeline / bf16)}."""
    rows = []
    for name, ms in times.items():
        reference, kind = refs[name]
        ratios = [a / b for a, b in zip(ms, times[reference], strict=True)]
        med, lo, hi = median_interval(ratios)
        rows.append(
            {
                "row": name,
                "kind": kind,
                "reference": reference,
                "chunk_p50_ms": float(np.median(ms)),
                "chunk_p99_ms": float(np.percentile(ms, 99)),
                "rounds": len(ms),
                "vs_reference": {"median": med, "ci95": [lo, hi], "min": min(ratios), "max": max(ratios)},
                "max_abs_diff": diffs[name],
                "diff_units": UNITS[kind],
                "samples_ms": ms,
            }
        )
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "| row | chunk p50 ms | chunk p99 ms | / its LeRobot row (median [95% CI]) | actions max abs diff |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ref = r["vs_reference"]
        lines.append(
            f"| {r['row']} | {r['chunk_p50_ms']:.1f} | {r['chunk_p99_ms']:.1f} | {ref['median']:.2f}x "
            f"[{ref['ci95'][0]:.2f}, {ref['ci95'][1]:.2f}] | {r['max_abs_diff']:.2g} ({r['diff_units']}) |"
        )
    return "\n".join(lines)
