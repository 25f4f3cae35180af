"""GPU acceptance (issue 22): the gpu / trt tests, then full-size pi0.5 (random weights) through every engine and
precision, 1 and 2 cameras: prefill, step, TTFA, chunk p50 / p99, peak memory, each against the device profile's
roofline floor, and each variant's action fidelity vs torch fp32 on the same weights, inputs and noise with the quant
gate's verdict; then batch scaling. Writes OUT/acceptance.json (everything) and OUT/acceptance.md (a table per camera
count, the device named), atomically, after every step.

    # on the GPU machine, from the checkout; each call resumes from the last call's record, carried in
    python3 tools/gpu_acceptance.py --out $OUT --resume build/acceptance/acceptance.json --budget-s 540
    python3 tools/gpu_acceptance.py --device cpu --policy pi05-tiny --variants torch-fp32 torch-bf16 \\
        onnxruntime-fp32 --skip-tests --skip-batch --iters 2 --warmup 1 --out /tmp/acc   # the CPU smoke path

No install needed: the script imports vlash from this checkout (tools/gpu_acceptance_rows.py), also in the test and
batch subprocesses. Optional wheels (onnxruntime-gpu, tensorrt, gymnasium for fp8 calibration) are installed
beforehand with `pip install --no-index --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site`, or by the
script with `--wheelhouse .whl` (pip --no-index --no-deps --target; the target goes on sys.path and PYTHONPATH).
A variant whose engine is missing is recorded as unavailable, with the reason.

Every row runs in a process of its own, so a CUDA error, an OOM or a crash there is that row's finding (status
error / timeout, with the error) and the run goes on. The run resumes: rows already measured in OUT/acceptance.json
(or `--resume FILE`, an earlier one carried to a fresh machine) are kept; unavailable and deferred ones are tried
again, errors only with `--retry`. `--budget-s` stops starting work past that many seconds, and a row cut short by
it is deferred to the next call: the exit status is 3 while work is left (call again), 0 when the run is complete,
2 for bad arguments or `--device cuda` without a GPU.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from itertools import product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_acceptance_rows as rows  # noqa: E402  (after the path it is found on)

rows.use_checkout()

DEFAULT_VARIANTS = (
    "torch-fp32",
    "torch-bf16",
    "torch-bf16-compile",
    "torch-bf16-graphs",
    "onnxruntime-fp16-cuda",
    "onnxruntime-fp16-trt",
    "tensorrt-fp16",
    "tensorrt-bf16",
    "tensorrt-fp8",
)
RETRIED = ("skipped", "unavailable", "deferred")  # statuses tried again on every call; errors only with --retry
MIN_START_S = 30.0  # with --budget-s: no row or stage starts with less left


class Budget:
    def __init__(self, seconds: float) -> None:
        self.start, self.seconds = time.monotonic(), seconds

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.start) if self.seconds > 0 else float("inf")

    def allow(self, timeout_s: float) -> tuple[float, bool]:
        """(timeout for the next piece of work, whether it gets its full allowance); 0 when none may start."""
        left = self.left()
        if left < MIN_START_S:
            return 0.0, False
        return min(timeout_s, left), left >= timeout_s


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("build/acceptance"), help="acceptance.json / .md go here")
    p.add_argument("--policy", default="pi05", help="preset (random weights)")
    p.add_argument("--cameras", type=int, nargs="+", default=[1, 2])
    p.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS), help="tools/bench_engines.py VARIANTS")
    p.add_argument("--iters", type=int, default=20, help="timed chunks per row")
    p.add_argument("--warmup", type=int, default=3, help="untimed chunks before timing")
    p.add_argument("--steps", type=int, default=10, help="Euler steps (constant schedule)")
    p.add_argument("--fidelity-obs", type=int, default=4, help="observations of the fidelity comparison")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--profile", default=None, help="device profile (default: from the GPU's name, else h100)")
    p.add_argument("--threads", type=int, default=0, help="CPU threads of torch / onnxruntime (0: default)")
    p.add_argument("--skip-tests", action="store_true")
    p.add_argument("--skip-batch", action="store_true")
    p.add_argument("--wheelhouse", type=Path, default=None, help="install these *.whl first (no index, no deps)")
    p.add_argument("--resume", type=Path, default=None, help="an earlier acceptance.json (default: OUT's)")
    p.add_argument("--fresh", action="store_true", help="ignore earlier results")
    p.add_argument("--retry", action="store_true", help="run rows and stages that ended in an error again")
    p.add_argument("--budget-s", type=float, default=0, help="start no work past this many seconds (0: no limit)")
    p.add_argument("--row-timeout", type=float, default=420, help="seconds one row may take")
    p.add_argument("--tests-timeout", type=float, default=420)
    p.add_argument("--batch-timeout", type=float, default=300)
    p.add_argument("--workdir", type=Path, default=None, help="exports (deleted per row; default: a temp dir)")
    args = p.parse_args(argv)
    if min(args.cameras) < 1 or args.iters < 1 or args.warmup < 0 or args.steps < 1 or args.fidelity_obs < 1:
        p.error("--cameras, --iters, --steps and --fidelity-obs must be >= 1, --warmup >= 0")
    from bench_engines import VARIANTS

    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        p.error(f"unknown variants {unknown}; known: {', '.join(sorted(VARIANTS))}")
    return args


# ---------------------------------------------------------------------------------------------- the record
def save(doc: dict, out: Path) -> None:
    from vlash.atomic import atomic_write

    atomic_write(out / "acceptance.json", lambda f: f.write(json.dumps(doc, indent=1, default=str).encode()))
    try:
        text = rows.render(doc)
    except Exception as exc:  # the JSON is written; a table that cannot be drawn must not end the run
        text = f"# GPU acceptance\n\nacceptance.md failed ({type(exc).__name__}: {exc}): see acceptance.json\n"
    atomic_write(out / "acceptance.md", lambda f: f.write(text.encode()))


def load(args: argparse.Namespace, run: dict) -> dict:
    """The earlier record of this run (same policy, device, profile and settings), with a row or stage that was
    running when its call stopped marked interrupted; a new record otherwise."""
    path = args.resume or args.out / "acceptance.json"
    doc = {"schema": 1, "run": run, "calls": [], "stages": {}, "rows": []}
    if args.fresh or not path.is_file():
        return doc
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        rows.say(f"cannot read {path} ({exc}): starting afresh")
        return doc
    if earlier.get("run") != run:
        rows.say(f"{path} is of another run ({earlier.get('run')}): starting afresh")
        return doc
    for row in earlier.get("rows", []):
        if row.get("status") == "running":
            message = "the call stopped during this row (its time limit?); --retry runs it again"
            row.update(status="interrupted", error={"type": "interrupted", "message": message, "unavailable": False})
    rows.say(f"resuming {path}: {len(earlier.get('rows', []))} rows recorded")
    return {**doc, **earlier}


def due(record: dict | None, retry: bool) -> bool:
    status = (record or {}).get("status")
    return status in (None, *RETRIED) or (retry and status != "ok")


# ---------------------------------------------------------------------------------------------- stages
def stage_subprocess(doc: dict, name: str, cmd: list[str], timeout_s: float, budget: Budget) -> dict | None:
    """Run `cmd` (rows.checkout_command) from the repository root; its record, stdout included, or None when the
    budget allows no start."""
    timeout, full = budget.allow(timeout_s)
    if not timeout:
        return None
    rows.say(f"{name}: {' '.join(cmd[3:])} (up to {timeout:.0f} s)")
    started, record = time.monotonic(), {"status": "ok", "command": cmd[3:]}
    try:
        done = subprocess.run(cmd, cwd=rows.ROOT, capture_output=True, text=True, timeout=timeout)
        record["returncode"], out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        out, err = (x.decode(errors="replace") if isinstance(x, bytes) else x or "" for x in (exc.stdout, exc.stderr))
        record.update(status="timeout" if full else "deferred", returncode=None)
    record.update(seconds=round(time.monotonic() - started, 1), stdout=out, stderr_tail=err[-3000:])
    doc["stages"][name] = record
    return record


def stage_tests(doc: dict, args: argparse.Namespace, budget: Budget) -> None:
    flags = ["-q", "-p", "no:cacheprovider", "-rfEs", "--continue-on-collection-errors", "tests"]
    cmd = rows.checkout_command("-m pytest", "-m", "gpu or trt", *flags)
    record = stage_subprocess(doc, "tests", cmd, args.tests_timeout, budget)
    if record is None:
        return
    out = record.pop("stdout")
    summary = next((line for line in reversed(out.splitlines()) if re.search(r"\d+ \w+.* in [\d.]+s", line)), "")
    record["counts"] = {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", summary)}
    record["summary"] = summary.strip("= ")
    record["problems"] = [line for line in out.splitlines() if line.startswith(("FAILED", "ERROR", "SKIPPED"))][:60]
    record["tail"] = out[-6000:]
    if record["status"] == "ok" and record["returncode"] not in (0, 1, 5):  # 1: tests failed (findings); 5: none ran
        record["status"] = "error"
    rows.say(f"tests: {record['status']}, {record['summary'] or 'no summary'}")


def stage_batch(doc: dict, args: argparse.Namespace, budget: Budget) -> None:
    flags = f"--policy {args.policy} --device {args.device} --dtype bf16 --sizes 1 2 4 8 --rounds 5".split()
    cmd = rows.checkout_command(str(rows.TOOLS / "bench_batch_scaling.py"), *flags)
    record = stage_subprocess(doc, "batch_scaling", cmd, args.batch_timeout, budget)
    if record is None:
        return
    record["table"] = [line for line in record.pop("stdout").splitlines() if line.startswith(("|", "<!--"))]
    if record["status"] == "ok" and record["returncode"] != 0:
        record["status"] = "error"
    rows.say(f"batch scaling: {record['status']}")


def stage_rows(doc: dict, args: argparse.Namespace, budget: Budget, workdir: Path) -> None:
    from bench_engines import VARIANTS

    recorded = {(r["cameras"], r["variant"]): r for r in doc["rows"]}
    order = [(c, v) for c in args.cameras for v in args.variants]
    for i, (cameras, name) in enumerate(order, 1):
        if not due(recorded.get((cameras, name)), args.retry):
            continue
        timeout, full = budget.allow(args.row_timeout)
        if not timeout:
            return
        if (cameras, name) not in recorded:
            doc["rows"].append(recorded.setdefault((cameras, name), {}))
        row, variant, where = recorded[(cameras, name)], VARIANTS[name], f"row {i}/{len(order)}: {cameras} cam {name}"
        row.clear()
        row.update(cameras=cameras, variant=name, engine=variant.engine, precision=variant.precision, status="running")
        save(doc, args.out)
        rows.say(f"{where} (up to {timeout:.0f} s)")
        job = {**doc["run"], "cameras": cameras, "variant": name, "threads": args.threads}
        job["workdir"] = str(workdir / f"{cameras}cam-{name}")
        Path(job["workdir"]).mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        parts, ended = rows.run_isolated(rows.measure_row, job, timeout)
        shutil.rmtree(job["workdir"], ignore_errors=True)  # a full-size export is many GB
        row.update(finish(parts, ended, full, time.monotonic() - started))
        save(doc, args.out)
        rows.say(f"{where}: {one_line(row)}")


def finish(parts: dict, ended: str, full: bool, seconds: float) -> dict:
    """A row's record from what its process emitted and how it ended."""
    error = parts.get("error")
    if error:
        status = "unavailable" if error["unavailable"] else "error"
    elif ended == "done":
        status = "ok"
    else:
        status = ("timeout" if full else "deferred") if ended == "timeout" else "error"
        error = {"type": ended, "message": f"the row's process ended: {ended}", "unavailable": False}
    phase = parts.get("phase") if status != "ok" else None
    keep = ("engine", "bench", "fidelity", "device_used_mib")
    return {"status": status, "phase": phase, "seconds": round(seconds, 1), "error": error} | {
        k: parts.get(k) for k in keep
    }


def one_line(row: dict) -> str:
    if row.get("error"):
        return f"{row['status']} in {row['phase']}: {row['error']['type']}: {row['error']['message'][:200]}"
    chunk, fid = row["bench"]["summary"]["chunk_ms"], row["fidelity"]
    floor = f" ({chunk['vs_floor']:.1f}x floor)" if "vs_floor" in chunk else ""
    return (
        f"ok, chunk p50 {chunk['median']:.1f} ms{floor}; cosine min {fid['cosine_min']:.6f}, max abs "
        f"{fid['max_abs_error']:.4g}, gate {fid['gate']} ({row['seconds']:.0f} s)"
    )


# ---------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    budget = Budget(args.budget_s)
    wheels = rows.install_wheels(args.wheelhouse) if args.wheelhouse else None
    import torch

    from vlash.devices import load_profile
    from vlash.errors import ConfigError

    if args.device == "cuda" and not torch.cuda.is_available():
        return refuse(
            f"--device cuda, but torch {torch.__version__} sees no CUDA GPU (--device cpu: the CPU smoke path)"
        )
    env = rows.environment()
    name, why = (
        (args.profile, "--profile") if args.profile else rows.choose_profile(args.device, env["cuda"].get("gpu", ""))
    )
    try:
        profile = load_profile(name)
    except ConfigError as exc:
        return refuse(str(exc))
    if profile.device != args.device:
        return refuse(f"profile {name!r} is for device {profile.device}, not {args.device}")
    run = {k: getattr(args, k) for k in ("policy", "device", "steps", "iters", "warmup", "fidelity_obs")}
    doc = load(args, {**run, "profile": name, "schedule": "constant"})
    doc.update(environment=env, wheels=wheels)
    doc["profile"] = {
        "name": name,
        "why": why,
        "bandwidth_gbs": profile.memory_bandwidth_gbs,
        "peak_tflops": profile.peak_tflops,
    }
    doc["calls"].append({"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "argv": sys.argv[1:] if argv is None else argv})
    save(doc, args.out)
    rows.say(f"{env['cuda'].get('gpu', 'CPU')}: profile {name} ({why}); writing {args.out}")
    workdir = Path(tempfile.mkdtemp(prefix="vlash-acceptance-", dir=args.workdir))
    stages = [
        ("tests", args.skip_tests, lambda: stage_tests(doc, args, budget)),
        ("rows", False, lambda: stage_rows(doc, args, budget, workdir)),
        ("batch_scaling", args.skip_batch, lambda: stage_batch(doc, args, budget)),
    ]
    try:
        for stage, skip, run_stage in stages:
            if skip:
                doc["stages"].setdefault(stage, {"status": "skipped"})
            elif stage == "rows" or due(doc["stages"].get(stage), args.retry):
                guarded(doc, stage, run_stage)
            save(doc, args.out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return conclude(doc, args, budget)


def refuse(line: str) -> int:
    print(f"gpu_acceptance: {line}", file=sys.stderr)
    return 2


def guarded(doc: dict, name: str, stage) -> None:
    """A stage that raises is recorded as that stage's error; the next stage still runs."""
    try:
        stage()
    except Exception as exc:
        doc["stages"][name] = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
        rows.say(f"{name}: error {type(exc).__name__}: {exc}")


def conclude(doc: dict, args: argparse.Namespace, budget: Budget) -> int:
    """Exit status: 0 when every asked-for row and stage has its result, 3 when some are left to a next call."""
    statuses = {(r["cameras"], r["variant"]): r["status"] for r in doc["rows"]}
    pending = [k for k in product(args.cameras, args.variants) if statuses.get(k) in (None, "deferred")]
    for stage, skip in (("tests", args.skip_tests), ("batch_scaling", args.skip_batch)):
        if not skip and doc["stages"].get(stage, {}).get("status") in (None, "skipped", "deferred"):
            pending.append(stage)
    doc["complete"] = not pending
    doc["calls"][-1]["seconds"] = round(time.monotonic() - budget.start, 1)
    save(doc, args.out)
    counts = {s: list(statuses.values()).count(s) for s in sorted(set(statuses.values()))}
    left = f"{len(pending)} left ({pending[:4]}...): call again" if pending else "complete"
    rows.say(f"wrote {args.out}/acceptance.json and .md; rows {counts}; {left}")
    return 3 if pending else 0


if __name__ == "__main__":
    sys.exit(main())
