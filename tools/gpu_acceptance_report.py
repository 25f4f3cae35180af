"""What tools/gpu_acceptance.py writes: the roofline floors, the issue's targets judged on one run, and the markdown.

Pure functions of the run's JSON document (no torch): the supervisor calls them after every row.
"""

from __future__ import annotations

METRICS = (("prefill_ms", "prefill"), ("step_ms", "step"), ("ttfa_ms", "TTFA"), ("chunk_ms", "chunk"))
FLASHRT_MS = 17.6  # FlashRT, FP8, RTX 5090, 2 views (the anchor)


def floors(configs: dict, profile, precision: str = "bf16") -> dict:
    """{cameras: {prefill, step, chunk}} of the roofline floor, each with its seconds, bound, FLOPs and bytes."""
    from vlash.devices.roofline import model_floors

    table = {}
    for cameras, config in configs.items():
        parts = model_floors(config, profile, precision)
        row = {
            name: {"ms": f.seconds * 1e3, "bound": f.bound, "gflop": f.work.flops / 1e9, "gb": f.work.bytes / 1e9}
            for name, f in parts.items()
        }
        steps = config.num_steps
        row["chunk"] = {"ms": row["prefill"]["ms"] + steps * row["step"]["ms"], "steps": steps}
        table[str(cameras)] = row
    return table


def _median(row: dict | None, metric: str = "chunk_ms") -> float | None:
    if not row or row.get("status") != "ok" or "summary" not in row:
        return None
    return row["summary"][metric]["median"]


def targets(doc: dict) -> list[dict]:
    """The issue's targets on the rows of this run (full pi0.5, 2 cameras, 10 steps, batch 1, bf16), each with its
    measured value and ratio; "n/a" where a row it needs did not run."""
    rows = doc["rows"]
    graph, eager = rows.get("graph-chunk-2cam"), rows.get("eager-bf16-2cam")
    chunk, eager_chunk = _median(graph), _median(eager)
    floor = graph["summary"]["chunk_ms"].get("floor") if chunk is not None else None
    fidelity = rows.get("fidelity-2cam", {}).get("variants", {}).get("graph-chunk")
    cosine = fidelity["cosine_min"] if fidelity else None

    def judged(name: str, value: float | None, limit: float, higher_is_better: bool, unit: str) -> dict:
        passed = None if value is None else (value >= limit if higher_is_better else value <= limit)
        return {"target": name, "value": value, "limit": limit, "unit": unit, "passed": passed}

    return [
        judged("whole-chunk graph chunk / floor", chunk / floor if chunk and floor else None, 3.0, False, "x"),
        judged(
            "bf16 eager / whole-chunk graph", eager_chunk / chunk if chunk and eager_chunk else None, 4.0, True, "x"
        ),
        judged("action cosine vs fp32 (graph, min)", cosine, 0.999, True, ""),
        judged("stretch: chunk / floor", chunk / floor if chunk and floor else None, 1.5, False, "x"),
        judged("stretch: chunk ms (FlashRT 17.6 ms, FP8, RTX 5090)", chunk, FLASHRT_MS, False, "ms"),
    ]


def _cell(summary: dict, metric: str) -> str:
    row = summary[metric]
    ratio = f" ({row['vs_floor']:.1f}x)" if "vs_floor" in row else ""
    return f"{row['median']:.2f} / {row['p99']:.2f}{ratio}"


def _bench_line(row_id: str, row: dict) -> str:
    cells = [row_id, row.get("precision", "-"), (row.get("engine") or {}).get("compile", "-")]
    if "summary" in row:
        cells += [_cell(row["summary"], m) for m, _ in METRICS]
        ha = row.get("horizon_aware")
        cells.append(f"{ha['ttfa_ms']['median']:.2f}" if ha else "-")
        cells.append(f"{row['peak_memory_mb']:.0f}")
    else:
        cells += ["-"] * (len(METRICS) + 2)
    fid = row.get("fidelity")
    cells.append(f"{fid['cosine_min']:.6f} / {fid['max_abs_error']:.3g}" if fid else "-")
    return "| " + " | ".join([*cells, _status(row)]) + " |"


def _status(row: dict) -> str:
    status = row.get("status", "?")
    if row.get("error"):
        message = (row["error"].get("message", "").strip().splitlines() or [""])[0][:160]
        return f"{status}: {row['error'].get('type', '')} {message}".strip()
    return status


def _value(t: dict) -> str:
    if t["value"] is None:
        return "n/a"
    return f"{t['value']:.4f}" if t["unit"] == "" else f"{t['value']:.2f}{t['unit']}"


def render(doc: dict) -> str:
    run, env = doc["run"], doc.get("environment", {})
    cuda = env.get("cuda", {})
    device = cuda.get("gpu") or f"CPU ({env.get('cpus', '?')} cores)"
    lines = [
        f"# GPU acceptance: {run['policy']}, {run['steps']} steps, chunk {run['horizon']}, on {device}",
        "",
        f"torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), Python {env.get('python')}, commit "
        f"{env.get('commit') or '?'}; profile {doc.get('profile', {}).get('name')} "
        f"({doc.get('profile', {}).get('why')}). Command: `{run['command']}`.",
        "",
        "## Roofline floor (bf16, batch 1): max(bytes / bandwidth, FLOPs / peak) per phase",
        "",
        "| cameras | prefill ms (bound, GFLOP, GB) | step ms (bound, GFLOP, GB) | chunk ms |",
        "|---|---|---|---|",
    ]
    for cameras, f in sorted(doc.get("floors", {}).items()):
        p, s = f["prefill"], f["step"]
        lines.append(
            f"| {cameras} | {p['ms']:.3f} ({p['bound']}, {p['gflop']:.0f}, {p['gb']:.2f}) | {s['ms']:.3f} "
            f"({s['bound']}, {s['gflop']:.0f}, {s['gb']:.2f}) | {f['chunk']['ms']:.3f} |"
        )
    lines += ["", "## Targets", "", "| target | measured | limit | verdict |", "|---|---|---|---|"]
    for t in doc.get("targets", []):
        verdict = {True: "met", False: "NOT met", None: "n/a"}[t["passed"]]
        lines.append(f"| {t['target']} | {_value(t)} | {t['limit']:g}{t['unit']} | {verdict} |")
    lines += _rows(doc)
    return "\n".join(lines) + "\n"


def _rows(doc: dict) -> list[str]:
    run, rows = doc["run"], doc["rows"]
    lines = [
        "",
        f"## Rows (ms p50 / p99 over {run['iters']} chunks after {run['warmup']} warm-up; (x) = p50 / floor)",
        "",
        "| row | precision | engine | prefill | step | TTFA | chunk | TTFA horizon-aware p50 | peak MiB | cos min / "
        "max abs vs fp32 | status |",
        "|---" * 11 + "|",
    ]
    other = []
    for row_id, row in rows.items():
        if "batches" in row:
            other += ["", f"### {row_id}: chunk p50 ms and chunks/s by batch", ""]
            for batch, b in row["batches"].items():
                other.append(f"- B = {batch}: {b['summary']['chunk_ms']['median']:.2f} ms, {b['chunks_per_s']:.1f}/s")
        elif "variants" in row:
            other += ["", f"### {row_id}: vs fp32 on the same weights, inputs and noise", ""]
            for name, f in row["variants"].items():
                other.append(f"- {name}: cosine min {f['cosine_min']:.6f}, max abs {f['max_abs_error']:.3g}")
        elif "tests" in row:
            other += ["", f"### {row_id}: {row['tests']}", ""]
        if "summary" in row or row.get("status") != "ok":
            lines.append(_bench_line(row_id, row))
    unavailable = doc.get("unavailable", {})
    if unavailable:
        other += ["", "### Not available on this machine (recorded at no cost)", ""]
        other += [f"- {name}: {why}" for name, why in unavailable.items()]
    return lines + other
