"""The comparison and the report of tools/cpu_precheck.py: every candidate row's actions against the fp32 eager row on
the same weights, inputs and noise, and every static-program row's against the eager row of its own dtype; the
issue's targets judged on them; markdown for docs/BENCHMARKS.md."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from cpu_precheck_rows import CANDIDATES, ROWS

MIN_COSINE_BF16 = 0.999  # issue 46 §1: a bf16 path against fp32 eager
MAX_ABS_STATIC = 1e-3  # issue 46 §1: a static program against eager in the same dtype
# fp8 against fp32: vlash.quant's fidelity gate (GateThresholds: cosine >= 0.99, max abs <= 0.1), as the acceptance run
MIN_COSINE_FP8, MAX_ABS_FP8 = 0.99, 0.1


def cosine_min(got: np.ndarray, ref: np.ndarray) -> float:
    """The worst cosine over the batch's rows, each row's chunk [H, A] flattened (vlash.quant.fidelity's measure)."""
    got, ref = got.reshape(got.shape[0], -1).astype(np.float64), ref.reshape(ref.shape[0], -1).astype(np.float64)
    cos = (got * ref).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))
    return float(cos.min())


def max_abs(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())


def load(out: Path, precision: str) -> dict[str, np.ndarray]:
    path = out / f"{precision}.npz"
    if not path.exists():
        return {}
    with np.load(path) as saved:
        return {key: saved[key] for key in saved.files}


def compare(out: Path, runs: dict[str, dict]) -> dict[str, dict]:
    """Per candidate row: its record from the worker plus the comparisons its saved actions allow."""
    actions = load(out, "fp32") | load(out, "bf16")
    table = {}
    for row in CANDIDATES:
        record = dict(runs.get("bf16", {}).get("rows", {}).get(row.id, {"status": "not run"}))
        got = actions.get(row.id)
        if got is not None and row.reference in actions:
            ref = actions[row.reference]
            record |= {"cosine_vs_fp32": cosine_min(got, ref), "max_abs_vs_fp32": max_abs(got, ref)}
        if got is not None and row.eager_twin in actions:
            record["max_abs_vs_eager"] = max_abs(got, actions[row.eager_twin])
        if got is not None and f"{row.id}@first" in actions:
            record["max_abs_first_vs_last"] = max_abs(got, actions[f"{row.id}@first"])
        table[row.id] = record
    return table


def targets(table: dict[str, dict], runs: dict[str, dict]) -> list[dict]:
    """The issue's targets: each {target, value, limit, passed}; passed is None where nothing was measured."""
    refs = runs.get("fp32", {}).get("rows", {})
    ran = list(refs.values()) + list(table.values())
    out = [_target("every path runs (rows ok)", sum(r.get("status") == "ok" for r in ran), len(ran))]
    out[0]["passed"] = all(r.get("status") == "ok" for r in ran) and bool(ran)
    bf16 = [r for k, r in table.items() if not ROWS[k].quant]
    fp8 = [r for k, r in table.items() if ROWS[k].quant]
    static = [r for k, r in table.items() if ROWS[k].graphs]
    out.append(_worst("bf16 cosine vs fp32 (min)", bf16, "cosine_vs_fp32", MIN_COSINE_BF16, lowest=True))
    out.append(_worst("static program vs eager, same dtype (max abs)", static, "max_abs_vs_eager", MAX_ABS_STATIC))
    out.append(_worst("torch-fp8 cosine vs fp32 (min)", fp8, "cosine_vs_fp32", MIN_COSINE_FP8, lowest=True))
    out.append(_worst("torch-fp8 max abs vs fp32", fp8, "max_abs_vs_fp32", MAX_ABS_FP8))
    return out


def _target(name: str, value: float | None, limit: float) -> dict:
    return {"target": name, "value": value, "limit": limit, "passed": None}


def _worst(name: str, records: list[dict], key: str, limit: float, lowest: bool = False) -> dict:
    values = [r[key] for r in records if key in r]
    target = _target(name, None, limit)
    if len(values) < len(records) or not values:  # a row that could not be compared fails the target
        target["passed"] = False if records else None
        target["value"] = (min(values) if lowest else max(values)) if values else None
        return target
    target["value"] = min(values) if lowest else max(values)
    target["passed"] = target["value"] >= limit if lowest else target["value"] <= limit
    return target


def _num(record: dict, key: str, fmt: str) -> str:
    return format(record[key], fmt) if key in record else "-"


def _status(record: dict) -> str:
    return record.get("status", "?") + (f": {record['error']}"[:300] if record.get("error") else "")


def render(doc: dict) -> str:
    env, runs = doc["environment"], doc["runs"]
    lines = [
        f"# CPU pre-check: {doc['policy']}, {env['cameras']} cameras, {env['steps']} steps, chunk {env['horizon']}, "
        f"prompt {env['max_token_len']} tokens",
        "",
        f"{env['cpu']} ({env['cores']} cores), torch {env['torch']}, {env['threads']} threads; load average "
        f"{env['load_before']} before, {env['load_after']} after. Command: `{doc['command']}`.",
        "",
        "| process | build s | build peak RSS GiB |",
        "|---|---|---|",
    ]
    for precision, run in runs.items():
        built = run.get("build")  # none when the worker died before its weights were built
        cells = f"{built['seconds']:.1f} | {built['peak_rss_gib']:.2f}" if built else f"- | - ({run.get('killed')})"
        lines.append(f"| {precision} | {cells} |")
    lines += ["", "| target | measured | limit | verdict |", "|---|---|---|---|"]
    for t in doc["targets"]:
        value = "n/a" if t["value"] is None else f"{t['value']:.6g}"
        verdict = {True: "met", False: "NOT met", None: "n/a"}[t["passed"]]
        lines.append(f"| {t['target']} | {value} | {t['limit']:g} | {verdict} |")
    lines += [
        "",
        "| row | graphs | schedule | B | tau | cos vs fp32 | max abs vs fp32 | max abs vs eager | first vs last "
        "| chunk s (first, last) | row s | peak RSS GiB | status |",
        "|---" * 13 + "|",
    ]
    for row_id, fp32 in runs.get("fp32", {}).get("rows", {}).items():
        lines.append(_line(row_id, fp32 | {"cosine_vs_fp32": 1.0, "max_abs_vs_fp32": 0.0}))
    lines += [_line(row_id, record) for row_id, record in doc["rows"].items()]
    return "\n".join(lines) + "\n"


def _line(row_id: str, r: dict) -> str:
    row = ROWS[row_id]
    tau = "[B, 1]" if row.shared_time else "[B, H]"
    chunks = ", ".join(f"{s:.1f}" for s in r.get("chunk_s", [])) or "-"
    peak = _num(r, "peak_rss_gib", ".2f") + ("" if r.get("peak_rss_scope", "row") == "row" else " (process)")
    cells = [
        row_id,
        row.graphs or "eager",
        row.schedule,
        str(row.batch),
        tau,
        _num(r, "cosine_vs_fp32", ".6f"),
        _num(r, "max_abs_vs_fp32", ".3g"),
        _num(r, "max_abs_vs_eager", ".3g"),
        _num(r, "max_abs_first_vs_last", ".3g"),
        chunks,
        _num(r, "seconds", ".1f"),
        peak,
        _status(r),
    ]
    return "| " + " | ".join(cells) + " |"
