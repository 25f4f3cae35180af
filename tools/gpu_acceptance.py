"""GPU acceptance (issue 32) in one call on the lent machine: full pi0.5 (random weights, 2 cameras at 224, 10 steps,
chunk 50), bf16, batch 1, built once on the GPU; rows in priority order (tools/gpu_acceptance_rows.py ROWS): eager,
the whole-chunk CUDA graph, per-step graphs, fidelity vs fp32, batch scaling, torch.compile, fp8, the `gpu` tests.
Each row has its own time cap; JSON and markdown go to --out after every row, with the roofline floor and the
issue's targets judged on this run.

    # here, once: the wheels the GPU machine lacks (its Python is 3.12), into .whl/ (git-ignored)
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl pyzmq
    # on the GPU machine (device run with carry [".whl"], timeout_s 600):
    python3 tools/gpu_acceptance.py --wheels .whl --out $OUT
    # the dry run: pi05-tiny on this CPU, every row type (tests/tools/test_gpu_acceptance.py)
    python tools/gpu_acceptance.py --dry-run --out /tmp/acceptance

No install: vlash is imported from this checkout. The worker (tools/gpu_acceptance_rows.py) builds the weights once
and runs the rows; this process holds each to its cap and, past a row that hung or killed the worker, records it
(timeout / error) and starts a new worker for the rest. --budget-s bounds the whole run: rows that cannot start in
time are recorded as skipped (exit 3; `--resume OLD.json` keeps the rows it has). onnxruntime-gpu and TensorRT cannot
be carried there (over 64 MiB): they are recorded as unavailable at no cost. Exit 2: bad arguments, or --device cuda
without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_acceptance_report as report  # noqa: E402  (found on the path above)
import gpu_acceptance_rows as rows  # noqa: E402
from gpu_acceptance_env import choose_profile, environment, install_wheels  # noqa: E402

ROOT = rows.ROOT
MIN_START_S = 20.0  # no worker starts with less of the budget left
BETWEEN_ROWS_S = 60.0  # the longest a worker may take from one row's result to the next row's start
WORKER = [sys.executable, str(ROOT / "tools" / "gpu_acceptance_rows.py")]  # + ["--job", FILE]
DRY_RUN = {"policy": "pi05-tiny", "device": "cpu", "iters": 2, "warmup": 1, "batches": [1, 2], "fidelity_obs": 2}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("build/acceptance"), help="acceptance.json / .md / logs go here")
    p.add_argument("--wheels", type=Path, default=None, help="a folder of *.whl to install first (pyzmq)")
    p.add_argument("--budget-s", type=float, default=500.0, help="the whole run's time (default fits one call)")
    p.add_argument("--rows", nargs="+", choices=rows.ROW_IDS, default=None, help="run only these (default: all)")
    p.add_argument("--resume", type=Path, default=None, help="an earlier acceptance.json: its ok rows are kept")
    p.add_argument("--dry-run", action="store_true", help="pi05-tiny on the CPU, 2 chunks per row (a check)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--policy", default="pi05", help="preset (random weights)")
    p.add_argument("--iters", type=int, default=20, help="timed chunks per row")
    p.add_argument("--warmup", type=int, default=3, help="untimed chunks first (builds the graphs)")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8], help="the batch row's sizes")
    p.add_argument("--fidelity-obs", type=int, default=4, help="observations of each fidelity comparison")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads on --device cpu")
    args = p.parse_args(argv)
    if args.dry_run:
        for key, value in DRY_RUN.items():
            setattr(args, key, value)
    if min(args.iters, *args.batches, args.fidelity_obs) < 1 or args.warmup < 0:
        p.error("--iters, --batches and --fidelity-obs must be >= 1, --warmup >= 0")
    return args


def say(line: str) -> None:
    rows.say(line)


class Run:
    """The run's document, written to --out (JSON and markdown, atomically) after every change."""

    def __init__(self, args: argparse.Namespace, argv: list[str] | None) -> None:
        self.args, self.out = args, args.out
        self.out.mkdir(parents=True, exist_ok=True)
        command = "python3 tools/gpu_acceptance.py " + shlex.join(argv if argv is not None else sys.argv[1:])
        self.doc: dict = {
            "run": {
                "policy": args.policy,
                "device": args.device,
                "steps": None,
                "horizon": None,
                "iters": args.iters,
                "warmup": args.warmup,
                "batches": args.batches,
                "command": command,
            },
            "rows": {},
        }
        if args.resume is not None:
            kept = json.loads(args.resume.read_text()).get("rows", {})
            self.doc["rows"] = {k: v for k, v in kept.items() if v.get("status") == "ok"}

    def record(self, row_id: str, result: dict) -> None:
        self.doc["rows"][row_id] = result
        self.write()

    def write(self) -> None:
        self.doc["targets"] = report.targets(self.doc)
        for name, text in (
            ("acceptance.json", json.dumps(self.doc, indent=1)),
            ("acceptance.md", report.render(self.doc)),
        ):
            partial = self.out / f".{name}.partial"
            partial.write_text(text)
            partial.replace(self.out / name)


def _reader(stream, lines: queue.Queue, log: Path | None = None) -> None:
    with open(log, "a") if log else open(os.devnull, "w") as sink:
        for line in stream:
            lines.put(line)
            sink.write(line)
            sink.flush()
    lines.put(None)


def run_workers(run: Run, pending: list[str], deadline: float) -> None:
    """Run the worker rows of `pending` in order, each within its cap, a new worker past a row that failed it."""
    caps = {r.id: r.cap_s for r in rows.ROWS} | {"weights": rows.WEIGHTS_CAP_S}
    args = run.args
    while pending:
        if deadline - time.monotonic() < MIN_START_S:
            for row_id in pending:
                run.record(
                    row_id,
                    {
                        "id": row_id,
                        "status": "skipped",
                        "error": {"type": "budget", "message": "the run's --budget-s ran out"},
                    },
                )
            return
        job = {
            "rows": pending,
            "policy": args.policy,
            "device": args.device,
            "iters": args.iters,
            "warmup": args.warmup,
            "batches": args.batches,
            "fidelity_obs": args.fidelity_obs,
            "threads": args.threads,
            "profile": run.doc["profile"]["name"],
        }
        job_file = run.out / "job.json"
        job_file.write_text(json.dumps(job))
        cmd = [*WORKER, "--job", str(job_file)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        events: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, events), daemon=True).start()
        errors: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stderr, errors, run.out / "worker.log"), daemon=True).start()
        _watch(run, proc, events, errors, pending, caps, deadline)
        job_file.unlink(missing_ok=True)


def _watch(run: Run, proc, events: queue.Queue, errors: queue.Queue, pending: list[str], caps: dict, deadline: float):
    current, until = None, time.monotonic() + rows.WEIGHTS_CAP_S
    tail: list[str] = []

    def drain(wait_s: float = 0.0) -> None:
        """Echo the worker's stderr (its last lines kept for an error); `wait_s`: until it ends, at most that."""
        end = time.monotonic() + wait_s
        while True:
            try:
                line = errors.get(timeout=max(0.0, end - time.monotonic())) if wait_s else errors.get_nowait()
            except queue.Empty:
                return
            if line is None:
                return
            sys.stderr.write(line)
            tail.append(line)
            del tail[:-40]

    while True:
        drain()
        try:
            line = events.get(timeout=max(0.0, min(until, deadline) - time.monotonic()))
        except queue.Empty:
            os.killpg(proc.pid, 9)
            proc.wait()
            stalled = current or pending[0]  # between two rows: the next one is charged with the stall
            _fail(run, pending, stalled, "timeout", f"over its cap of {caps[stalled]:.0f} s (or the budget)")
            return
        if line is None:  # the worker ended
            code = proc.wait()
            drain(wait_s=5.0)
            if pending and current is not None:
                _fail(run, pending, current, "error", f"worker died (exit {code}): {''.join(tail)[-1500:]}")
            return
        kind, _, payload = line.partition(" ")
        if kind == "@@start":
            current = json.loads(payload)["id"]
            until = time.monotonic() + caps[current]
        elif kind == "@@result":
            result = json.loads(payload)
            result["cap_s"] = caps[result["id"]]
            pending.remove(result["id"])
            run.record(result["id"], result)
            current, until = None, time.monotonic() + BETWEEN_ROWS_S


def _fail(run: Run, pending: list[str], current: str, status: str, message: str) -> None:
    """The stage `current` failed the worker: that row (or, for the weights, every pending row) gets `status`."""
    failed = list(pending) if current == "weights" else [current]
    for row_id in failed:
        run.record(row_id, {"id": row_id, "status": status, "error": {"type": status, "message": message}})
        pending.remove(row_id)


def run_tests(run: Run, cap_s: float) -> None:
    """pytest -m gpu on the test files that hold gpu tests, vlash imported from this checkout."""
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py") if "mark.gpu" in p.read_text())
    boot = (
        f"import sys, runpy; sys.path[:0] = [{str(ROOT / 'tools')!r}]; import gpu_acceptance_rows; "
        "gpu_acceptance_rows.use_checkout(); runpy.run_module('pytest', run_name='__main__', alter_sys=True)"
    )
    cmd = [sys.executable, "-c", boot, "-q", "-m", "gpu", "-p", "no:cacheprovider", *files]
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=cap_s)
    except subprocess.TimeoutExpired:
        run.record(
            "gpu-tests",
            {"id": "gpu-tests", "status": "timeout", "error": {"type": "timeout", "message": f"over {cap_s:.0f} s"}},
        )
        return
    (run.out / "tests.log").write_text(done.stdout + done.stderr)
    summary = next(
        (line for line in reversed(done.stdout.splitlines()) if re.search(r"passed|failed|skipped", line)), "no summary"
    )
    status = "ok" if done.returncode in (0, 5) else "failed"  # 5: nothing collected
    run.record(
        "gpu-tests",
        {
            "id": "gpu-tests",
            "status": status,
            "tests": summary.strip("= "),
            "files": files,
            "returncode": done.returncode,
            "seconds": round(time.monotonic() - start, 1),
        },
    )


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    start = time.monotonic()
    run = Run(args, argv)
    if args.wheels is not None:
        run.doc["wheels"] = install_wheels(args.wheels)
    rows.use_checkout()
    from vlash.devices import load_profile
    from vlash.policies.pi05.config import load_preset

    env, unavailable = environment()
    if args.device == "cuda" and not env["cuda"]["available"]:
        print("gpu_acceptance: --device cuda, but torch sees no GPU (use --dry-run on a CPU)", file=sys.stderr)
        return 2
    name, why = choose_profile(args.device, env["cuda"].get("gpu", ""))
    profile = load_profile(name)
    configs = {cams: load_preset(args.policy).with_cameras(cams) for cams in (1, 2)}
    run.doc |= {"environment": env, "unavailable": unavailable, "profile": {"name": name, "why": why}}
    run.doc["run"] |= {"steps": configs[2].num_steps, "horizon": configs[2].action_horizon}
    run.doc["floors"] = report.floors(configs, profile)
    run.write()
    say(
        f"{env['cuda'].get('gpu', 'CPU')}, profile {name}; floors (bf16, ms): "
        + "; ".join(
            f"{c} cam prefill {f['prefill']['ms']:.2f} step {f['step']['ms']:.3f} chunk {f['chunk']['ms']:.2f}"
            for c, f in run.doc["floors"].items()
        )
    )
    wanted = [r for r in (args.rows or rows.ROW_IDS) if r not in run.doc["rows"]]
    deadline = start + args.budget_s
    run_workers(run, [r for r in wanted if r != "gpu-tests"], deadline)
    if "gpu-tests" in wanted:
        left = deadline - time.monotonic()
        if left < MIN_START_S:
            run.record(
                "gpu-tests",
                {"id": "gpu-tests", "status": "skipped", "error": {"type": "budget", "message": "no time left"}},
            )
        else:
            run_tests(run, min(left, next(r.cap_s for r in rows.ROWS if r.id == "gpu-tests")))
    run.write()
    print(report.render(run.doc))
    return 3 if any(r.get("status") == "skipped" for r in run.doc["rows"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
