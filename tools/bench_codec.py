"""The protocol codec's calls of one round trip, this tree against another commit's, interleaved call by call.

The four calls are the client's encode of an INFER (2 x 224x224x3 uint8 images + a 32-dim state; with the
sender-side check), the server's decode of it, the server's encode of the ACTIONS reply (a 50x32 float32
chunk; with the check) and the client's decode of that. In a real round trip each call runs right after its
process wakes from a socket poll, which on this VM makes it 3-4x slower than back to back, so each call is
also timed after a `--pause` sleep. The baseline's robot_io/protocol is read with `git show` into a
temporary package; both run in this process, alternating, so drift of the VM falls on both alike.

    python tools/bench_codec.py --baseline REV [--rounds 1500] [--pause-ms 0.5]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from bench_transport import CHUNK, make_request

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "robot_io/protocol"
BASELINE_NAME = "baseline_protocol"


def baseline_protocol(rev: str, into: Path) -> ModuleType:
    """robot_io.protocol as of `rev`, importable as BASELINE_NAME (its imports of itself renamed)."""
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{rev}:{PACKAGE}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    package = into / BASELINE_NAME
    package.mkdir()
    for name in (n for n in names if n.endswith(".py")):
        source = subprocess.run(
            ["git", "show", f"{rev}:{PACKAGE}/{name}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        (package / name).write_text(source.replace("robot_io.protocol", BASELINE_NAME))
    sys.path.insert(0, str(into))
    return importlib.import_module(BASELINE_NAME)


def calls(protocol: ModuleType) -> dict[str, Callable[[], object]]:
    """The round trip's four codec calls with `protocol`'s own message classes."""
    request = make_request(1)
    infer = protocol.Infer(
        request.request_id, request.step_index, request.capture_time_ns, request.prompt, request.images, request.state
    )
    actions = protocol.Actions(1, 0, CHUNK, True, 50, 1, {"total_ms": 0.0})
    infer_frames = protocol.encode(infer, validate=False)
    actions_frames = protocol.encode(actions, validate=False)
    return {
        "encode INFER (checked)": lambda: protocol.encode(infer),
        "decode INFER": lambda: protocol.decode(infer_frames),
        "encode ACTIONS (checked)": lambda: protocol.encode(actions),
        "decode ACTIONS": lambda: protocol.decode(actions_frames),
    }


def timed(fn: Callable[[], object], pause_s: float) -> float:
    if pause_s:
        time.sleep(pause_s)
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def compare(base: dict, new: dict, rounds: int, pause_s: float) -> dict[str, tuple[list[float], list[float]]]:
    times = {name: ([], []) for name in base}
    for i in range(rounds):
        for name in base:
            first, second = (base, new) if i % 2 else (new, base)
            a, b = timed(first[name], pause_s), timed(second[name], pause_s)
            times[name][0].append(a if first is base else b)
            times[name][1].append(b if first is base else a)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="git revision whose robot_io/protocol is the baseline")
    ap.add_argument("--rounds", type=int, default=1500, help="timed calls per codec call, path and pause")
    ap.add_argument("--pause-ms", type=float, default=0.5, help="sleep before each call in the 'after a wake' rows")
    args = ap.parse_args()
    import robot_io.protocol as current

    with tempfile.TemporaryDirectory(prefix="bench-codec-") as tmp:
        base, new = calls(baseline_protocol(args.baseline, Path(tmp))), calls(current)
        print(f"| call | timing | {args.baseline} p50 / p99 us | this tree p50 / p99 us | p50 saved |")
        print("|---|---|---|---|---|")
        for label, pause in (("back to back", 0.0), (f"after a {args.pause_ms:g} ms sleep", args.pause_ms / 1e3)):
            sums = [0.0, 0.0]
            for name, (old, now) in compare(base, new, args.rounds, pause).items():
                p50 = statistics.median(old), statistics.median(now)
                p99 = sorted(old)[int(0.99 * (len(old) - 1))], sorted(now)[int(0.99 * (len(now) - 1))]
                sums = [sums[0] + p50[0], sums[1] + p50[1]]
                saved = 1 - p50[1] / p50[0]
                print(f"| {name} | {label} | {p50[0]:.1f} / {p99[0]:.1f} | {p50[1]:.1f} / {p99[1]:.1f} | {saved:.0%} |")
            print(f"| sum of the four p50s | {label} | {sums[0]:.1f} | {sums[1]:.1f} | {1 - sums[1] / sums[0]:.0%} |")


if __name__ == "__main__":
    main()
