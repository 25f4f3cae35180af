"""CPU pre-check of the GPU run (issue 46 §1): full-size pi0.5 (random weights, 2 cameras at 224, the full
200-token prompt, 10 steps, chunk 50) through every path tools/gpu_acceptance.py takes except CUDA itself and
torch.compile: eager bf16, the static chunk and step programs (TorchEngine graphs="chunk" / "step": on the CPU
the same programs run from their static buffers, not captured), both schedules, per-token tau, batch 2, and
torch-fp8 weights (torch._scaled_mm on the CPU). Each row is compared with fp32 eager on the same weights, inputs
and noise, and each static-program row with eager in its own dtype; per row: action cosine, max abs error, peak
RSS, wall time.

    # full size, by hand (~14 GB RAM at the peak, 15-25 min on 2 cores); docs/BENCHMARKS.md has its table
    python tools/cpu_precheck.py --out build/cpu-precheck
    # the smoke run: pi05-tiny (tests/tools/test_cpu_precheck.py, in CI)
    python tools/cpu_precheck.py --smoke --out /tmp/precheck

Two processes, one after the other, never together: fp32 (the reference rows) and bf16 (every other row; the
torch-fp8 rows last, quantizing the bf16 weights in place), each built from the same seed
(tools/cpu_precheck_rows.py). Each saves its actions (.npz) and records (.json) to --out after every row;
precheck.json and precheck.md hold the comparison. Before a process starts, the memory its weights need (fp32
parameter bytes, which build_random allocates first, plus a margin) must be available, waited for up to
--wait-memory-s; while it runs it is killed if the machine's available memory falls under MIN_AVAILABLE_GIB
(there is no swap: the kernel would otherwise pick a process to kill). Exit 0: every target met; 1: a target not
met or a row failed; 2: bad arguments, or not enough memory to start within --wait-memory-s.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_precheck_report as report  # noqa: E402  (found on the path above)
import cpu_precheck_rows as rows  # noqa: E402

ROOT = rows.ROOT
WORKER = [sys.executable, str(ROOT / "tools" / "cpu_precheck_rows.py")]  # + ["--job", FILE]
MIN_AVAILABLE_GIB = 1.0  # the worker is killed when the machine's MemAvailable falls under this
MARGIN_GIB = 1.5  # activations, static buffers and the interpreter, over the fp32 parameter bytes
POLL_S = 0.5


class NotEnoughMemory(RuntimeError):
    """The machine has less memory available than a worker needs to start."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("build/cpu-precheck"), help="npz / json / precheck.md go here")
    p.add_argument("--policy", default="pi05", help="preset (random weights); --smoke: pi05-tiny")
    p.add_argument("--smoke", action="store_true", help="pi05-tiny: every row, in seconds (the CI test)")
    p.add_argument("--threads", type=int, default=None, help="torch threads of each worker (default: torch's)")
    p.add_argument("--rows", nargs="+", choices=sorted(rows.ROWS), default=None, help="only these (default: all)")
    p.add_argument("--wait-memory-s", type=float, default=600.0, help="how long a worker waits for its memory")
    p.add_argument("--keep-reference", action="store_true", help="reuse --out's fp32 results of the same policy")
    args = p.parse_args(argv)
    if args.smoke:
        args.policy = "pi05-tiny"
    if args.threads is not None and args.threads < 1:
        p.error("--threads must be >= 1")
    if args.wait_memory_s < 0:
        p.error("--wait-memory-s must be >= 0")
    return args


def available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    raise NotEnoughMemory("/proc/meminfo has no MemAvailable line: the memory guard cannot work here")


def needed_gib(policy: str) -> float:
    """What one worker needs: the fp32 parameter bytes (build_random builds in fp32, then casts) plus the margin."""
    import torch

    rows.use_checkout()
    from vlash.policies.pi05.config import load_preset
    from vlash.policies.pi05.model import Pi05Model

    with torch.device("meta"):
        model = Pi05Model(load_preset(policy).with_cameras(rows.CAMERAS))
    return sum(p.numel() for p in model.parameters()) * 4 / 2**30 + MARGIN_GIB


def wait_for_memory(need_gib: float, wait_s: float) -> float:
    """The available GiB once it reaches `need_gib`, or after `wait_s` (other processes' memory comes and goes)."""
    deadline = time.monotonic() + wait_s
    have = available_gib()
    while have < need_gib and time.monotonic() < deadline:
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        have = available_gib()
    return have


def run_worker(job: dict, need_gib: float, wait_s: float) -> dict:
    """Start the worker of `job` once `need_gib` is available (waiting up to `wait_s`), guard the machine's memory
    while it runs, return what it recorded (with how it ended)."""
    have = wait_for_memory(need_gib, wait_s)
    if have < need_gib:
        raise NotEnoughMemory(
            f"{job['precision']}: {have:.1f} GiB available after waiting {wait_s:.0f} s, {need_gib:.1f} GiB needed"
        )
    out = Path(job["out"])
    for suffix in (".json", ".npz"):
        (out / f"{job['precision']}{suffix}").unlink(missing_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    rows.say(f"{job['precision']}: {len(job['rows'])} rows ({have:.1f} GiB available, {need_gib:.1f} needed)")
    worker = subprocess.Popen([*WORKER, "--job", f.name], cwd=ROOT)
    low = None
    while worker.poll() is None:
        if available_gib() < MIN_AVAILABLE_GIB:
            low = available_gib()
            worker.kill()
            worker.wait()
            break
        time.sleep(POLL_S)
    Path(f.name).unlink(missing_ok=True)
    path = out / f"{job['precision']}.json"
    doc = json.loads(path.read_text()) if path.exists() else {"precision": job["precision"], "rows": {}}
    doc["exit"] = worker.returncode
    if low is not None:
        doc["killed"] = f"machine memory available fell to {low:.2f} GiB < {MIN_AVAILABLE_GIB} GiB"
    for row_id in job["rows"]:  # rows the worker never reached
        reason = doc.get("killed") or f"worker exited {worker.returncode} before this row"
        doc["rows"].setdefault(row_id, {"status": "not run", "error": reason})
    return doc


def environment(args: argparse.Namespace, load_before: str) -> dict:
    import torch

    from vlash.devices.host_rates import cpu_model
    from vlash.policies.pi05.config import load_preset

    cfg = load_preset(args.policy)
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": args.threads or torch.get_num_threads(),
        "cameras": rows.CAMERAS,
        "steps": cfg.num_steps,
        "horizon": cfg.action_horizon,
        "max_token_len": cfg.max_token_len,
        "load_before": load_before,
        "load_after": _load(),
    }


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    command = shlex.join(["python", "tools/cpu_precheck.py", *(sys.argv[1:] if argv is None else argv)])
    args.out.mkdir(parents=True, exist_ok=True)
    load_before, runs = _load(), {}
    try:
        need = needed_gib(args.policy)
        for precision in ("fp32", "bf16"):
            kept = args.out / "fp32.json"
            if precision == "fp32" and args.keep_reference and kept.exists():
                runs["fp32"] = json.loads(kept.read_text())
                if runs["fp32"].get("policy") == args.policy:
                    rows.say("fp32: kept from an earlier run")
                    continue
            job = rows.job_for(precision, args.policy, args.out, args.threads, args.rows)
            runs[precision] = run_worker(job, need, args.wait_memory_s) | {"policy": args.policy}
            (args.out / f"{precision}.json").write_text(json.dumps(runs[precision], indent=1))
    except NotEnoughMemory as exc:
        print(f"cpu_precheck: not enough memory: {exc}", file=sys.stderr)
        return 2
    table = report.compare(args.out, runs)
    doc = {"policy": args.policy, "command": command, "environment": environment(args, load_before), "runs": runs}
    doc |= {"rows": table, "targets": report.targets(table, runs)}
    (args.out / "precheck.json").write_text(json.dumps(doc, indent=1))
    markdown = report.render(doc)
    (args.out / "precheck.md").write_text(markdown)
    print(markdown)
    return 0 if all(t["passed"] for t in doc["targets"] if t["passed"] is not None) else 1


if __name__ == "__main__":
    sys.exit(main())
