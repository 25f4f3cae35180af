"""The rows of tools/cpu_precheck.py, and the worker process that runs one precision's rows.

A worker builds the weights once (random pi0.5 from SEED, so the fp32 and the bf16 process hold the same weights up
to rounding), runs its rows in order and saves what each produced: `<out>/<precision>.npz` (the actions of every
chunk: `ROW` is the last chunk, `ROW@first` the first, which built the row's static programs) and
`<out>/<precision>.json` (per row: status, wall time, chunk times, peak RSS, the engine, the programs, the error).
A row that raises is recorded with the exact error and the next row runs. The torch-fp8 rows come last: they
quantize the bf16 weights in place (the way tools/gpu_acceptance_rows.py quantizes a copy, without the copy's 8 GB).

Light at import (no torch, no vlash): the supervisor reads the rows from here.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from gpu_acceptance_rows import use_checkout  # vlash from this checkout, as the acceptance worker imports it

ROOT = Path(__file__).resolve().parents[1]
SEED = 0  # the weights: build_random(seed=SEED), as tools/gpu_acceptance_rows.py builds them
INPUT_SEED = 1000  # the observation of every row: random_inputs(seed=INPUT_SEED), as the acceptance fidelity row
NOISE_SEED = 0  # the noise [B, H, A] of every row: torch.randn with a generator of this seed
CAMERAS = 2  # the acceptance run's main rows: 2 cameras


@dataclass(frozen=True)
class Row:
    id: str  # what the tables call it; the .npz key of its actions
    precision: str  # "fp32" (the reference process) or "bf16"
    graphs: str | None = None  # TorchEngine graphs: None (eager), "chunk" or "step" (static programs, not captured)
    schedule: str = "constant"  # the sampler's schedule: "constant" or "horizon-aware"
    batch: int = 1  # rows of one chunk; row b's prompt has prompt_tokens(config, batch)[b] valid tokens
    shared_time: bool = True  # tau [B, 1] where a row's tokens share one time (as `vlash bench` runs); False: [B, H]
    quant: str | None = None  # a torch weight-only scheme applied to the weights in place ("torch-fp8"), or None
    chunks: int = 2  # chunks run on the same inputs and noise; the first builds the row's static programs

    @property
    def reference(self) -> str:
        """The fp32 eager row on the same inputs and noise."""
        return next(r.id for r in REFERENCES if (r.schedule, r.batch) == (self.schedule, self.batch))

    @property
    def eager_twin(self) -> str | None:
        """The eager row of the same dtype, weights, schedule, batch and tau shape that a static-program row must
        equal (tau [B, 1] and [B, H] condition the model through matmuls of different shapes: not the same bits)."""
        if self.graphs is None:
            return None
        key = (self.schedule, self.batch, self.quant, self.shared_time)
        twins = (r for r in CANDIDATES if r.graphs is None)
        return next(r.id for r in twins if (r.schedule, r.batch, r.quant, r.shared_time) == key)


REFERENCES = (
    Row("fp32-eager", "fp32", chunks=1),
    Row("fp32-eager-horizon-aware", "fp32", schedule="horizon-aware", chunks=1),
    Row("fp32-eager-batch2", "fp32", batch=2, chunks=1),
)
CANDIDATES = (
    Row("bf16-eager", "bf16"),
    Row("bf16-graph-chunk", "bf16", graphs="chunk"),
    Row("bf16-graph-step", "bf16", graphs="step"),
    Row("bf16-eager-per-token-tau", "bf16", shared_time=False),
    Row("bf16-graph-chunk-per-token-tau", "bf16", graphs="chunk", shared_time=False),
    Row("bf16-eager-horizon-aware", "bf16", schedule="horizon-aware"),
    Row("bf16-graph-chunk-horizon-aware", "bf16", graphs="chunk", schedule="horizon-aware"),
    Row("bf16-graph-step-horizon-aware", "bf16", graphs="step", schedule="horizon-aware"),
    Row("bf16-eager-batch2", "bf16", batch=2),
    Row("bf16-graph-chunk-batch2", "bf16", graphs="chunk", batch=2),
    Row("fp8-eager", "bf16", quant="torch-fp8", chunks=1),  # _scaled_mm on the CPU is slow: one chunk each
    Row("fp8-graph-chunk", "bf16", graphs="chunk", quant="torch-fp8", chunks=1),
)
ROWS = {r.id: r for r in REFERENCES + CANDIDATES}


def prompt_tokens(max_token_len: int, batch: int) -> tuple[int, ...]:
    """Valid prompt tokens per row: the first row the full padded prompt, the second a quarter of it (padding masked,
    as a batch of different prompts is)."""
    return (max_token_len, max(1, max_token_len // 4))[:batch]


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def reset_peak_rss() -> bool:
    """Reset this process's RSS high-water mark (Linux >= 4.0: /proc/self/clear_refs "5"), so that ru_maxrss after a
    row is that row's peak; False where that is refused (the peak is then the process's so far)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def say(line: str) -> None:
    print(f"[cpu_precheck {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def run_chunk(engine, inputs, noise, row: Row):
    """One chunk as the acceptance run samples it: the prefill, then the sampler with the engine's spans."""
    import torch

    from vlash.sampling import FlowSampler, SamplerConfig

    sampler = FlowSampler(SamplerConfig(num_steps=engine.config.num_steps, schedule=row.schedule))
    with torch.no_grad():
        cache = engine.prefill(inputs)
        run = sampler.start(
            lambda x, tau: engine.denoise_step(x, tau, cache),
            noise,
            synchronize=engine.synchronize,
            shared_time=row.shared_time,
            spans=engine.spans(cache),
        )
        return run.drain().actions.float().cpu()


def run_row(model, row: Row) -> tuple[dict, dict]:
    """(the row's record, its actions by .npz key)."""
    import torch

    from vlash.engines import create_engine
    from vlash.policies.pi05.examples import random_inputs

    cfg = model.config
    inputs = random_inputs(
        cfg, batch=row.batch, seed=INPUT_SEED, valid_tokens=prompt_tokens(cfg.max_token_len, row.batch)
    )
    gen = torch.Generator().manual_seed(NOISE_SEED)
    noise = torch.randn(row.batch, cfg.action_horizon, cfg.action_dim, generator=gen)
    engine = create_engine("torch", model=model, graphs=row.graphs)
    chunk_s, actions = [], {}
    for i in range(row.chunks):
        start = time.monotonic()
        out = run_chunk(engine, inputs, noise, row)
        chunk_s.append(round(time.monotonic() - start, 3))
        actions[row.id if i == row.chunks - 1 else f"{row.id}@first"] = out.numpy()
        say(f"{row.id}: chunk {i + 1}/{row.chunks} in {chunk_s[-1]:.1f} s")
    record = {"chunk_s": chunk_s, "engine": engine.describe(), "programs": engine.programs}
    return record, actions


def build(job: dict):
    from vlash.policies.pi05.config import load_preset
    from vlash.policies.pi05.weights import build_random

    config = load_preset(job["policy"]).with_cameras(CAMERAS)
    return build_random(config, dtype=job["precision"], seed=SEED)


def quantize(model, scheme: str) -> None:
    from vlash.quant.torch_quant import plan_layers, quantize_model

    layers, _ = plan_layers(model, scheme)
    quantize_model(model, layers)
    model.quant_scheme = scheme


def run_worker(job: dict) -> None:
    import numpy as np
    import torch

    use_checkout()
    if job.get("threads"):
        torch.set_num_threads(job["threads"])
    out, precision = Path(job["out"]), job["precision"]
    start = time.monotonic()
    say(f"building {job['policy']} {precision} (seed {SEED})")
    model = build(job)
    build_s = {"seconds": round(time.monotonic() - start, 2), "peak_rss_gib": round(peak_rss_gib(), 3)}
    doc = {"precision": precision, "build": build_s}
    doc["threads"], doc["rows"], actions = torch.get_num_threads(), {}, {}
    for row_id in job["rows"]:
        row = ROWS[row_id]
        if row.quant and getattr(model, "quant_scheme", None) != row.quant:
            if getattr(model, "quant_scheme", None) is not None:
                raise ValueError(f"{row.id}: the weights are already {model.quant_scheme}")
            say(f"quantizing the weights in place: {row.quant}")
            quantize(model, row.quant)
        elif not row.quant and getattr(model, "quant_scheme", None):
            raise ValueError(f"{row.id} runs unquantized after a quantized row: order the rows as ROWS does")
        scoped = reset_peak_rss()
        start, result = time.monotonic(), {"status": "ok", "peak_rss_scope": "row" if scoped else "process"}
        try:
            record, chunk_actions = run_row(model, row)
            result |= record
            actions |= chunk_actions
        except Exception as exc:  # noqa: BLE001 - a row's failure is its finding; the next row runs
            result |= {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]}
            result["traceback"] = traceback.format_exc()[-4000:]
            say(f"{row.id}: {result['error']}")
        result |= {"seconds": round(time.monotonic() - start, 2), "peak_rss_gib": round(peak_rss_gib(), 3)}
        doc["rows"][row.id] = result
        np.savez(out / f"{precision}.npz", **actions)  # after every row: what ran survives a later kill
        (out / f"{precision}.json").write_text(json.dumps(doc, indent=1))


def rows_of(precision: str) -> list[str]:
    return [r.id for r in (REFERENCES if precision == "fp32" else CANDIDATES)]


def main() -> None:
    parser = argparse.ArgumentParser(description="the worker of tools/cpu_precheck.py (started by it)")
    parser.add_argument("--job", type=Path, required=True, help="the job JSON the supervisor wrote")
    run_worker(json.loads(parser.parse_args().job.read_text()))


def job_for(precision: str, policy: str, out: Path, threads: int | None, rows: list[str] | None = None) -> dict:
    chosen = rows_of(precision) if rows is None else [r for r in rows_of(precision) if r in rows]
    return {"precision": precision, "policy": policy, "out": str(out), "threads": threads, "rows": chosen}


def row_dict(row: Row) -> dict:
    return asdict(row) | {"reference": row.reference, "eager_twin": row.eager_twin}


if __name__ == "__main__":
    main()
