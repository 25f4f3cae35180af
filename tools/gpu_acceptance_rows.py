"""The pieces of tools/gpu_acceptance.py that run apart from its main process: importing vlash from a bare checkout,
one measured row in a process of its own (timings, then fidelity vs torch fp32 on the same weights, inputs and
noise), the environment probe and the choice of device profile.

Light at import (no torch): the launcher of the test and batch subprocesses imports this module first.
"""

from __future__ import annotations

import copy
import importlib.util
import multiprocessing
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
FIDELITY_SEED = 1000  # observation i of the fidelity set is random_inputs(seed=FIDELITY_SEED + i); noise: seed i
Emit = Callable[[str, Any], None]


def use_checkout() -> None:
    """Import vlash from this checkout without an install: the repository root on sys.path, and engines/ and quant/
    (installed as vlash.engines and vlash.quant, pyproject's package-dir) found through vlash's own path where no
    install maps them."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import vlash

    if importlib.util.find_spec("vlash.engines") is None:
        vlash.__path__.append(str(ROOT))


def checkout_command(target: str, *args: str) -> list[str]:
    """A python command running `target` (a script path, or "-m module") with vlash importable from this checkout."""
    run = (
        f"runpy.run_module({target[3:]!r}, run_name='__main__', alter_sys=True)"
        if target.startswith("-m ")
        else f"sys.argv[0] = {target!r}; runpy.run_path({target!r}, run_name='__main__')"
    )
    boot = f"import runpy, sys; sys.path[:0] = [{str(TOOLS)!r}]; import gpu_acceptance_rows; "
    return [sys.executable, "-c", boot + "gpu_acceptance_rows.use_checkout(); " + run, *args]


def say(line: str) -> None:
    print(f"[gpu_acceptance {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- isolated processes
def _child(target: Callable[[dict, Emit], None], job: dict, conn) -> None:
    use_checkout()

    def emit(key: str, value: Any) -> None:
        conn.send((key, value))

    try:
        target(job, emit)
    except BaseException as exc:  # everything becomes the row's finding; the parent decides what it means
        from vlash.errors import EngineUnavailable

        info = {"type": type(exc).__name__, "message": str(exc)[:2000], "traceback": traceback.format_exc()[-4000:]}
        emit("error", info | {"unavailable": isinstance(exc, EngineUnavailable)})
    finally:
        emit("done", None)
        conn.close()


def run_isolated(target: Callable[[dict, Emit], None], job: dict, timeout_s: float) -> tuple[dict, str]:
    """`target(job, emit)` in a spawned process: a CUDA error, an OOM or a crash there cannot poison the caller.
    Returns (what it emitted, by key; how it ended: "done", "died (exit N)" or "timeout")."""
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(target, job, send))  # not daemonic: torch.compile starts workers
    proc.start()
    send.close()  # the child's end only: EOF here once it exits
    parts: dict[str, Any] = {}
    deadline, ended = time.monotonic() + timeout_s, ""
    try:
        while not ended:
            left = deadline - time.monotonic()
            if left <= 0:
                ended = "timeout"
            elif recv.poll(min(left, 5.0)):
                try:
                    key, value = recv.recv()
                except EOFError:
                    proc.join(10)
                    ended = f"died (exit {proc.exitcode})"
                    break
                if key == "done":
                    ended = "done"
                else:
                    parts[key] = value
    finally:
        proc.join(0 if ended != "done" else 60)  # a finished row's process gets a minute to exit, then it is killed
        if proc.is_alive():
            proc.kill()
            proc.join()
        recv.close()
    return parts, ended


# ---------------------------------------------------------------------------------------------- one row
def measure_row(job: dict, emit: Emit) -> None:
    """Build the variant, time it (vlash.bench.run_bench with the profile's roofline floors), then compare its action
    chunks with torch fp32 on the same weights: build_random(config) on the CPU, seed 0, as every artifact export."""
    import torch
    from bench_engines import VARIANTS

    from vlash.bench import BenchSettings, bench_config, run_bench
    from vlash.devices import load_profile
    from vlash.engines import create_engine
    from vlash.policies.checkpoint import build_random, resolve_dtype

    if job["threads"]:
        torch.set_num_threads(job["threads"])
    name, device = job["variant"], torch.device(job["device"])
    variant, config, profile = VARIANTS[name], bench_config(job["policy"], job["cameras"]), load_profile(job["profile"])
    where = f"{job['cameras']} cam {name}"
    emit("phase", "build")
    say(f"{where}: building")
    weights = None
    if variant.engine == "torch" and variant.build is None:  # make_engine would draw the weights on the device
        weights = build_random(config)
        model = copy.deepcopy(weights).to(device=device, dtype=resolve_dtype(variant.precision))
        engine = create_engine("torch", model=model, **variant.options)
    else:
        engine = variant.make(config, profile, Path(job["workdir"]), job["threads"])
    emit("engine", engine.describe())
    emit("phase", "bench")
    say(f"{where}: timing {job['warmup']} + {job['iters']} chunks")
    settings = BenchSettings(schedule="constant", steps=job["steps"], iters=job["iters"], warmup=job["warmup"])
    emit("bench", run_bench(engine, settings, profile=profile).to_dict())
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        emit("device_used_mib", (total - free) / 2**20)  # the whole process: ORT / TensorRT memory included
    emit("phase", "fidelity")
    say(f"{where}: fidelity vs torch fp32 on {job['fidelity_obs']} observations")
    reference = create_engine("torch", model=(weights if weights is not None else build_random(config)).to(device))
    emit("fidelity", fidelity(reference, engine, job["fidelity_obs"], job["steps"]))


def fidelity(reference, candidate, observations: int, steps: int) -> dict:
    """vlash.quant's action fidelity (cosine, max abs over all action dims; noise seeded per observation) and the
    quant gate's verdict."""
    from vlash.policies.pi05.examples import random_inputs
    from vlash.quant.fidelity import GateThresholds, action_fidelity, action_gate

    cfg, batch = reference.config, candidate.max_batch or 1
    inputs = [
        random_inputs(cfg, batch=batch, seed=FIDELITY_SEED + i, device=reference.device) for i in range(observations)
    ]
    result = action_fidelity(reference, candidate, inputs, cfg.action_dim, steps)
    thresholds = GateThresholds()
    reasons = action_gate(result, thresholds)
    return {
        **result.to_dict(),
        "action_dims": cfg.action_dim,
        "gate": "fail" if reasons else "pass",
        "reasons": reasons,
        "thresholds": {"min_cosine": thresholds.min_cosine, "max_abs_error": thresholds.max_abs_error},
    }


# ---------------------------------------------------------------------------------------------- environment
def _probe(read: Callable[[], dict]) -> dict:
    try:
        return read()
    except Exception as exc:  # a probe that fails is a finding of the environment, not a crash
        return {"error": f"{type(exc).__name__}: {exc}"}


def _command(*args: str) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _onnxruntime() -> dict:
    import onnxruntime as ort

    return {"version": ort.__version__, "providers": ort.get_available_providers(), "file": ort.__file__}


def _tensorrt() -> dict:
    from vlash.engines.tensorrt_build import import_tensorrt

    trt = import_tensorrt()
    return {"module": trt.__name__, "version": trt.__version__}


def _cuda() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"available": False}
    props = torch.cuda.get_device_properties(0)
    major, minor = torch.cuda.get_device_capability(0)
    return {
        "available": True,
        "gpu": torch.cuda.get_device_name(0),
        "capability": f"{major}.{minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "multiprocessors": props.multi_processor_count,
        "driver": _command("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader").split("\n")[0],
        "cudnn": torch.backends.cudnn.version(),
    }


def environment() -> dict:
    import torch

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda": _probe(_cuda),
        "onnxruntime": _probe(_onnxruntime),
        "tensorrt": _probe(_tensorrt),
        "commit": _command("git", "rev-parse", "HEAD"),
    }


def choose_profile(device: str, gpu: str) -> tuple[str, str]:
    """(device profile, why): "cpu" on the CPU; on a GPU the profile whose name its name holds ("h100" in "NVIDIA H100
    80GB HBM3", "rtx-4090" as "rtx 4090"), a Jetson's by vlash.devices.detect_jetson, else h100 (said so)."""
    if device == "cpu":
        return "cpu", "device cpu"
    from vlash.devices import available_profiles, detect_jetson
    from vlash.errors import ConfigError

    for name in available_profiles():
        if name.replace("-", " ") in gpu.lower():
            return name, f"GPU name {gpu!r}"
    try:
        return detect_jetson(), "Jetson detected"
    except ConfigError:
        return "h100", f"no profile matches GPU {gpu!r}: h100's floors used (check the bandwidth before comparing)"


def install_wheels(wheelhouse: Path, target: Path = Path("/tmp/vlash-acceptance-site")) -> dict:
    """pip install wheelhouse/*.whl --no-index --no-deps --target `target`, then `target` first on sys.path and
    PYTHONPATH (this process, its rows and its subprocesses). Call before onnxruntime / tensorrt are imported."""
    wheels = sorted(str(w) for w in Path(wheelhouse).glob("*.whl"))
    if not wheels:
        return {"error": f"no *.whl in {wheelhouse}"}
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir"]
    done = subprocess.run([*cmd, "--upgrade", "--target", str(target), *wheels], capture_output=True, text=True)
    sys.path.insert(0, str(target))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH")) if p)
    say(f"wheels: {len(wheels)} installed to {target} (pip exit {done.returncode})")
    return {
        "wheels": [Path(w).name for w in wheels],
        "target": str(target),
        "returncode": done.returncode,
        "output": (done.stdout + done.stderr)[-3000:],
    }


# ---------------------------------------------------------------------------------------------- acceptance.md
METRICS = (("prefill_ms", "prefill"), ("step_ms", "step"), ("ttfa_ms", "TTFA"), ("chunk_ms", "chunk"))


def _cell(summary: dict, metric: str) -> str:
    row = summary[metric]
    floor = f" ({row['vs_floor']:.1f}x)" if "vs_floor" in row else ""
    return f"{row['median']:.2f} / {row['p99']:.2f}{floor}"


def _table_row(row: dict) -> str:
    status = row["status"] if not row.get("phase") or row["status"] == "ok" else f"{row['status']} ({row['phase']})"
    cells = [row["variant"], row["precision"]]
    bench, fid = row.get("bench"), row.get("fidelity")
    if bench:
        cells += [_cell(bench["summary"], m) for m, _ in METRICS]
        used = f" (GPU {row['device_used_mib']:.0f})" if row.get("device_used_mib") else ""
        cells.append(f"{bench['peak_memory_mb']:.0f}{used}")
    else:
        cells += ["-"] * (len(METRICS) + 1)
    if fid:
        cells += [f"{fid['cosine_min']:.6f}", f"{fid['max_abs_error']:.3g}", fid["gate"]]
    else:
        cells += ["-"] * 3
    return "| " + " | ".join([*cells, status]) + " |"


def _floors(rows: list[dict]) -> str:
    floors = {}
    for row in rows:
        if row.get("bench") and row["bench"]["summary"]["chunk_ms"].get("floor"):
            summary = row["bench"]["summary"]
            floors.setdefault(row["precision"], ", ".join(f"{label} {summary[m]['floor']:.3f}" for m, label in METRICS))
    return "; ".join(f"{p}: {text} ms" for p, text in sorted(floors.items()))


def _device_line(doc: dict) -> str:
    env, profile = doc.get("environment", {}), doc.get("profile", {})
    cuda = env.get("cuda", {})
    where = (
        f"{cuda['gpu']} (capability {cuda['capability']}, {cuda['memory_gib']} GiB, driver {cuda['driver'] or '?'})"
        if cuda.get("available")
        else f"CPU ({env.get('platform', '?')}, {env.get('cpus')} cores)"
    )
    ort, trt = env.get("onnxruntime", {}), env.get("tensorrt", {})
    ort_text = f"onnxruntime {ort['version']} {ort['providers']}" if "version" in ort else f"onnxruntime: {ort}"
    trt_text = f"{trt['module']} {trt['version']}" if "version" in trt else "TensorRT: not installed"
    return (
        f"Device: {where}; torch {env.get('torch')} (CUDA {env.get('torch_cuda')}); {ort_text}; {trt_text}; "
        f"commit {env.get('commit') or '?'}. Profile {profile.get('name')} ({profile.get('why')}): "
        f"{profile.get('bandwidth_gbs')} GB/s, peak TFLOPS {profile.get('peak_tflops')}."
    )


def render(doc: dict) -> str:
    run, cuda = doc["run"], doc.get("environment", {}).get("cuda", {})
    limits = next((r["fidelity"]["thresholds"] for r in doc["rows"] if r.get("fidelity")), None)
    gate = f"cosine >= {limits['min_cosine']}, max abs <= {limits['max_abs_error']}" if limits else "GateThresholds"
    lines = [
        f"# GPU acceptance: {run['policy']} on {cuda.get('gpu') or 'the CPU'}, {run['steps']} steps, {run['schedule']}",
        "",
        _device_line(doc),
        "",
        f"Times in ms, p50 / p99 over {run['iters']} chunks after {run['warmup']} warm-up; (x) = p50 / roofline floor "
        "of the profile at the row's precision. Peak MiB: torch allocator (on a GPU, the whole process's use in "
        "brackets: onnxruntime and TensorRT memory included). Fidelity vs torch fp32 on the same weights, inputs and "
        f"noise, {run['fidelity_obs']} observations, all action dims; the quant gate: {gate}.",
    ]
    columns = ["variant", "precision", *(f"{label} p50 / p99" for _, label in METRICS), "peak MiB"]
    columns += ["cos min", "max abs", "gate", "status"]
    for cameras in sorted({r["cameras"] for r in doc["rows"]}):
        these = [r for r in doc["rows"] if r["cameras"] == cameras]
        lines += ["", f"## {cameras} camera{'s' if cameras > 1 else ''}", ""]
        lines += ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|", *map(_table_row, these)]
        lines += ["", f"Floors: {_floors(these) or 'none recorded'}."]
        for r in these:
            if r.get("error"):
                message = (r["error"]["message"].strip().splitlines() or [""])[0][:300]
                lines.append(f"- {r['variant']}: {r['status']}: {r['error']['type']}: {message}")
    return "\n".join(lines + _stages(doc.get("stages", {}))) + "\n"


def _stages(stages: dict) -> list[str]:
    tests, batch = stages.get("tests", {}), stages.get("batch_scaling", {})
    lines = ["", '## Tests (`pytest -m "gpu or trt"`)', ""]
    if tests.get("summary") is not None:
        lines.append(
            f"{tests['status']}: {tests['summary'] or 'no summary'} (exit {tests['returncode']}, {tests['seconds']} s)"
        )
        lines += [f"- {line}" for line in tests.get("problems", [])]
    else:
        lines.append(f"{tests.get('status', 'not run')} {tests.get('error', '')}".strip())
    lines += ["", "## Batch scaling (tools/bench_batch_scaling.py, bf16, B = 1 2 4 8)", ""]
    lines += batch.get("table") or [f"{batch.get('status', 'not run')} {batch.get('error', '')}".strip()]
    return lines
