"""What recording a run costs the control loop: `vlash run --record` (robot_io.rerun_trace) and `--record-dataset`
(robot_io.dataset) against no recording and `--trace` (JSON Lines), on a mock robot with a 640 x 480 and a 224 x 224
camera (random frames: the worst case for both encoders), paced at --rate-hz like the loop.

Per sink: the time `tick(row)` takes on the loop's thread (p50 / p99), the ticks whose frames were dropped because
the worker fell behind, and, for scale, what encoding the tick's frames inline would cost (JPEG for rerun, PNG for
the dataset: the work the worker threads take off the loop). The sinks run in a new random order each round
(interleaved), so a noisy machine loads them alike.

    python tools/bench_recording.py                       # 4 rounds x 150 ticks at 30 Hz per sink (~90 s)
    python tools/bench_recording.py --rounds 1 --ticks 10 # smoke (tests)
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from robot_io.dataset import open_dataset
from robot_io.rerun_trace import JPEG_QUALITY, RerunRecording, RerunTrace
from robot_io.robots.mock_robot import MockRobot
from robot_io.run_trace import JsonLinesTrace

CAMERAS = {"front": (480, 640), "wrist": (224, 224)}
SINKS = ("none", "trace (JSON Lines)", "rerun --record", "dataset --record-dataset")


def make_robot() -> MockRobot:
    robot = MockRobot(state_dim=6, action_dim=6, cameras=CAMERAS)
    robot.connect()
    return robot


def frames(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {name: rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for name, (h, w) in CAMERAS.items()}


def open_sink(kind: str, where: Path, robot: MockRobot, rate_hz: float):
    """(the sink, its closer, its dropped-frames count getter) for one round."""
    if kind == "none":
        return None, lambda: None, lambda: 0
    if kind.startswith("trace"):
        trace = JsonLinesTrace(where / "t.jsonl")
        return trace, trace.close, lambda: 0
    if kind.startswith("rerun"):
        recording = RerunRecording("bench", path=where / "r.rrd")
        trace = RerunTrace(recording, names=(robot.state_names, robot.action_names))
        return trace, recording.close, lambda: trace.dropped_frames
    recorder = open_dataset(where / "ds", robot, fps=round(rate_hz), robot_type="mock", task="bench")
    return recorder, recorder.close, lambda: recorder.dropped_frames


def run_round(kind: str, ticks: int, rate_hz: float, rng: np.random.Generator) -> tuple[list[float], int]:
    """Tick a sink `ticks` times at `rate_hz`; (per-tick ms on this thread, ticks whose frames were dropped)."""
    robot = make_robot()
    images = [frames(rng) for _ in range(4)]  # a few distinct frames, cycled
    with tempfile.TemporaryDirectory() as tmp:
        sink, close, dropped = open_sink(kind, Path(tmp), robot, rate_hz)
        with_images = getattr(sink, "wants_images", False)  # as the runner builds the rows
        period, start, spent = 1.0 / rate_hz, time.monotonic(), []
        for step in range(ticks):
            state = rng.standard_normal(6).astype(np.float32)
            row = dict(t=step * period, step=step, state=state, command=state, held=False, chunk=step // 10,
                       index=step % 10, tick_ms=1.0, reset=False, mode="vlash")  # fmt: skip
            if with_images:
                row.update(images=images[step % 4], prompt="bench")
            t0 = time.perf_counter()
            if sink is not None:
                sink.tick(row)
            spent.append((time.perf_counter() - t0) * 1e3)
            time.sleep(max(0.0, start + (step + 1) * period - time.monotonic()))
        close()
        return spent, dropped()


def inline_encode_ms(rng: np.random.Generator, reps: int) -> dict[str, list[float]]:
    """What encoding one tick's frames on the loop would cost: rerun's JPEG and the dataset's PNG."""
    import rerun as rr
    from PIL import Image

    from robot_io.dataset.parquet_writer import PNG_LEVEL

    def png(image: np.ndarray) -> None:
        Image.fromarray(image).save(io.BytesIO(), format="PNG", compress_level=PNG_LEVEL)

    encoders: dict[str, Callable[[np.ndarray], object]] = {
        "rerun --record": lambda image: rr.Image(image).compress(jpeg_quality=JPEG_QUALITY),
        "dataset --record-dataset": png,
    }
    out: dict[str, list[float]] = {k: [] for k in encoders}
    for _ in range(reps):
        tick = frames(rng)
        for name, encode in encoders.items():
            t0 = time.perf_counter()
            for image in tick.values():
                encode(image)
            out[name].append((time.perf_counter() - t0) * 1e3)
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=4, help="rounds; each runs every sink once, in a random order")
    p.add_argument("--ticks", type=int, default=150, help="ticks per sink per round")
    p.add_argument("--rate-hz", type=float, default=30.0, help="the loop's pace")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="also write the table's numbers as JSON")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.ticks < 1 or not args.rate_hz > 0:
        p.error("--rounds and --ticks must be >= 1 and --rate-hz > 0")
    rng, order = np.random.default_rng(args.seed), random.Random(args.seed)
    spent: dict[str, list[float]] = {k: [] for k in SINKS}
    dropped = dict.fromkeys(SINKS, 0)
    for r in range(args.rounds):
        for kind in order.sample(SINKS, len(SINKS)):
            ms, lost = run_round(kind, args.ticks, args.rate_hz, rng)
            spent[kind] += ms
            dropped[kind] += lost
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    inline = inline_encode_ms(rng, max(10, args.ticks // 5))
    total = args.rounds * args.ticks
    print(f"| sink | tick() on the loop p50 / p99 ms | ticks with frames dropped (of {total}) | "
          "encoding the tick's frames inline p50 / p99 ms |")  # fmt: skip
    print("|---|---|---|---|")
    rows = []
    for kind in SINKS:
        enc = inline.get(kind)
        cost = "-" if enc is None else f"{pct(enc, 50):.1f} / {pct(enc, 99):.1f}"
        print(f"| {kind} | {pct(spent[kind], 50):.3f} / {pct(spent[kind], 99):.3f} | {dropped[kind]} | {cost} |")
        rows.append({"sink": kind, "tick_p50_ms": pct(spent[kind], 50), "tick_p99_ms": pct(spent[kind], 99),
                     "dropped": dropped[kind], "ticks": total,
                     "inline_p50_ms": None if enc is None else pct(enc, 50),
                     "inline_p99_ms": None if enc is None else pct(enc, 99)})  # fmt: skip
    if args.out is not None:
        args.out.write_text(json.dumps({"rate_hz": args.rate_hz, "cameras": CAMERAS, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
