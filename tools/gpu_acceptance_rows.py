"""The rows of tools/gpu_acceptance.py, and the worker process that runs them.

The worker builds the weights once (random pi0.5, directly on the device, bf16; the fp32 reference only when a row
first needs it, drawn from the same seed) and runs the rows it is given in order, printing one line per event on
stdout for the supervisor: `@@start {"id": ...}` when a stage begins (the weights, then each row) and `@@result
{...}` when a row ends. The supervisor holds each stage to its time cap and restarts the worker past a row that
hung or killed it.

Light at import (no torch, no vlash): the supervisor reads ROWS from here.
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import json
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 0  # the weights: build_random(seed=SEED) for bf16 and the fp32 reference alike
FIDELITY_SEED = 1000  # observation i of the fidelity set: random_inputs(seed=FIDELITY_SEED + i); its noise: seed i
WEIGHTS_CAP_S = 240.0  # the worker's first stage: imports and the bf16 weights


@dataclass(frozen=True)
class Row:
    id: str  # what the tables call it
    kind: str  # "bench" (timing, and fidelity where asked), "fidelity", "batch", "tests"
    cap_s: float  # the longest it may take on the GPU; past it the worker is killed and the row is a timeout
    options: dict = field(default_factory=dict)  # cameras, graphs, compile_mode, quant, fidelity, horizon_aware


# In the order they run, the priority order: what is learnt first survives a short call.
ROWS = (
    Row("eager-bf16-2cam", "bench", 120, {"cameras": 2}),
    Row("eager-bf16-1cam", "bench", 90, {"cameras": 1}),
    Row("graph-chunk-2cam", "bench", 120, {"cameras": 2, "graphs": "chunk", "horizon_aware": True}),
    Row("graph-chunk-1cam", "bench", 90, {"cameras": 1, "graphs": "chunk", "horizon_aware": True}),
    Row("graph-step-2cam", "bench", 90, {"cameras": 2, "graphs": "step", "horizon_aware": True}),
    Row("graph-step-1cam", "bench", 90, {"cameras": 1, "graphs": "step"}),
    Row(
        "fidelity-2cam",
        "fidelity",
        150,
        {"cameras": 2, "variants": {"eager": None, "graph-chunk": "chunk", "graph-step": "step"}},
    ),
    Row("batch-graph-chunk-2cam", "batch", 150, {"cameras": 2, "graphs": "chunk"}),
    Row(
        "compile-graph-step-2cam",
        "bench",
        300,
        {"cameras": 2, "graphs": "step", "compile_mode": "default", "fidelity": True},
    ),
    Row(
        "fp8-graph-chunk-2cam", "bench", 150, {"cameras": 2, "graphs": "chunk", "quant": "torch-fp8", "fidelity": True}
    ),
    Row("gpu-tests", "tests", 240),
)
ROW_IDS = tuple(r.id for r in ROWS)


def use_checkout() -> None:
    """Import vlash from this checkout without an install: the repository root on sys.path, and engines/ and quant/
    (installed as vlash.engines and vlash.quant, pyproject's package-dir) found through vlash's own path."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import vlash

    if importlib.util.find_spec("vlash.engines") is None:
        vlash.__path__.append(str(ROOT))


def emit(kind: str, value: dict) -> None:
    print(f"@@{kind} {json.dumps(value)}", flush=True)


def say(line: str) -> None:
    print(f"[gpu_acceptance {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


class Session:
    """The weights and settings every row of one worker shares."""

    def __init__(self, job: dict) -> None:
        import torch

        from vlash.devices import load_profile
        from vlash.policies.pi05.config import load_preset
        from vlash.policies.pi05.weights import build_random

        self.job, self.device = job, torch.device(job["device"])
        if self.device.type == "cpu" and job.get("threads"):
            torch.set_num_threads(job["threads"])
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
        torch.backends.cudnn.allow_tf32 = False
        self.profile = load_profile(job["profile"])
        self.config = load_preset(job["policy"]).with_cameras(2)
        self.bf16 = build_random(self.config, dtype="bf16", device=self.device, seed=SEED)
        self._fp32 = None

    def model(self, cameras: int, fp32: bool = False):
        """The weights with `cameras` camera slots (the modules are shared: a camera count is only input shapes)."""
        if fp32 and self._fp32 is None:
            from vlash.policies.pi05.weights import build_random

            say("building the fp32 reference (same seed)")
            self._fp32 = build_random(self.config, dtype="fp32", device=self.device, seed=SEED)
        view = copy.copy(self._fp32 if fp32 else self.bf16)
        view.config = self.config.with_cameras(cameras)
        return view

    def engine(self, cameras: int, model=None, **options):
        from vlash.engines import create_engine

        return create_engine("torch", model=model if model is not None else self.model(cameras), **options)

    def settings(self, schedule: str = "constant", batch: int = 1):
        from vlash.bench import BenchSettings

        job = self.job
        return BenchSettings(schedule, self.config.num_steps, job["iters"], job["warmup"], batch)

    def fidelity(self, candidate, cameras: int) -> dict:
        """Action fidelity vs the fp32 reference on the same weights, inputs and noise (vlash.quant), and the gate."""
        from vlash.policies.pi05.examples import random_inputs
        from vlash.quant.fidelity import GateThresholds, action_fidelity, action_gate

        reference = self.engine(cameras, model=self.model(cameras, fp32=True))
        cfg = reference.config
        observations = [
            random_inputs(cfg, seed=FIDELITY_SEED + i, device=self.device) for i in range(self.job["fidelity_obs"])
        ]
        result = action_fidelity(reference, candidate, observations, cfg.action_dim, cfg.num_steps)
        thresholds = GateThresholds()
        return {**result.to_dict(), "gate": "fail" if action_gate(result, thresholds) else "pass"}


def bench_row(session: Session, row: Row) -> dict:
    from vlash.bench import run_bench

    opts, cameras = row.options, row.options["cameras"]
    model = None
    if opts.get("quant"):
        from vlash.quant.torch_quant import plan_layers, quantize_model

        model = copy.deepcopy(session.model(cameras))
        layers, _ = plan_layers(model, opts["quant"])
        quantize_model(model, layers)
        model.quant_scheme = opts["quant"]
    engine = session.engine(cameras, model, graphs=opts.get("graphs"), compile_mode=opts.get("compile_mode"))
    report = run_bench(engine, session.settings(), profile=session.profile)
    out = {"cameras": cameras, "engine": engine.describe(), **_report(report)}
    if opts.get("horizon_aware"):
        horizon_aware = run_bench(engine, session.settings("horizon-aware"), profile=session.profile)
        out["horizon_aware"] = _report(horizon_aware)["summary"]
    if opts.get("graphs"):
        out["programs"] = engine.programs
    if opts.get("fidelity"):
        out["fidelity"] = session.fidelity(engine, cameras)
    return out


def fidelity_row(session: Session, row: Row) -> dict:
    cameras = row.options["cameras"]
    variants = {
        name: session.fidelity(session.engine(cameras, graphs=graphs), cameras)
        for name, graphs in row.options["variants"].items()
    }
    return {"cameras": cameras, "variants": variants}


def batch_row(session: Session, row: Row) -> dict:
    from vlash.bench import run_bench

    cameras = row.options["cameras"]
    engine = session.engine(cameras, graphs=row.options["graphs"])
    batches = {}
    for batch in session.job["batches"]:
        report = _report(run_bench(engine, session.settings(batch=batch), profile=session.profile))
        chunk_s = report["summary"]["chunk_ms"]["median"] / 1e3
        batches[str(batch)] = {**report, "chunks_per_s": batch / chunk_s}
    return {"cameras": cameras, "engine": engine.describe(), "batches": batches}


def _report(report) -> dict:
    return {
        "summary": report.summary(),
        "warmup_s": report.warmup_s,
        "peak_memory_mb": report.peak_memory_mb,
        "precision": report.precision,
    }


RUNNERS = {"bench": bench_row, "fidelity": fidelity_row, "batch": batch_row}


def run_worker(job: dict) -> None:
    use_checkout()
    from vlash.errors import EngineUnavailable

    emit("start", {"id": "weights"})
    say(f"building {job['policy']} bf16 on {job['device']}")
    session = Session(job)
    rows = {r.id: r for r in ROWS}
    for row_id in job["rows"]:
        row = rows[row_id]
        emit("start", {"id": row.id})
        say(f"{row.id}: running (cap {row.cap_s:.0f} s)")
        start, result = time.monotonic(), {"id": row.id}
        try:
            result |= RUNNERS[row.kind](session, row) | {"status": "ok"}
        except EngineUnavailable as exc:
            result |= {"status": "unavailable", "error": _error(exc)}
        except Exception as exc:  # noqa: BLE001 - a row's failure is its finding; the next row runs
            result |= {"status": "error", "error": _error(exc)}
        result["seconds"] = round(time.monotonic() - start, 2)
        emit("result", result)
        gc.collect()
        if session.device.type == "cuda":
            import torch

            torch.cuda.empty_cache()


def _error(exc: BaseException) -> dict:
    return {"type": type(exc).__name__, "message": str(exc)[:2000], "traceback": traceback.format_exc()[-4000:]}


def main() -> None:
    parser = argparse.ArgumentParser(description="the worker of tools/gpu_acceptance.py (started by it)")
    parser.add_argument("--job", type=Path, required=True, help="the job JSON the supervisor wrote")
    run_worker(json.loads(parser.parse_args().job.read_text()))


if __name__ == "__main__":
    main()
