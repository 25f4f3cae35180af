"""Compare two `vlash eval --json` cells on the same seeds: the ratio of a metric's means with a paired
bootstrap interval, and both success rates. The cells are the same (mode, delay) of two files, or two cells of one
file (--second-mode / --second-delay: vlash against naive at d = 4, say).

    python tools/eval_compare.py q2.json q1.json --mode vlash --delay 4 [--metric completion_s]
    python tools/eval_compare.py grid.json grid.json --mode vlash --delay 4 --second-mode naive

A ratio below 1 means the first cell's metric is smaller (for completion_s: it finishes sooner). Both cells must
hold episodes for the same seeds (same --split/--seed and --episodes); pairs are matched by seed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vlash.eval.report import read_summary
from vlash.eval.stats import paired_ratio, wilson_interval


def cell_episodes(path: Path, mode: str, delay: int) -> dict[int, dict]:
    summary = read_summary(path)
    episodes = {e["seed"]: e for e in summary["episodes"] if e["mode"] == mode and e["delay"] == delay}
    if not episodes:
        raise SystemExit(f"{path}: no episodes of mode {mode!r} at delay {delay}")
    return episodes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first", type=Path)
    p.add_argument("second", type=Path)
    p.add_argument("--mode", required=True)
    p.add_argument("--delay", type=int, required=True)
    p.add_argument("--second-mode", default=None, help="the second file's mode (default: --mode)")
    p.add_argument("--second-delay", type=int, default=None, help="the second file's delay (default: --delay)")
    p.add_argument("--metric", default="completion_s", help="a per-episode number in the JSON (default completion_s)")
    args = p.parse_args(argv)
    second_mode = args.mode if args.second_mode is None else args.second_mode
    second_delay = args.delay if args.second_delay is None else args.second_delay
    try:
        a = cell_episodes(args.first, args.mode, args.delay)
        b = cell_episodes(args.second, second_mode, second_delay)
    except (OSError, ValueError) as exc:
        p.error(str(exc))
    seeds = sorted(a)
    if sorted(b) != seeds:
        raise SystemExit(f"the two cells hold different seeds ({len(a)} and {len(b)} episodes); rerun on the same ones")
    ratio, low, high = paired_ratio([a[s][args.metric] for s in seeds], [b[s][args.metric] for s in seeds])
    cells = [f"{args.mode} d={args.delay}", f"{second_mode} d={second_delay}"]
    files = [args.first.name, args.second.name]
    if cells[0] == cells[1]:  # one cell of two files
        names, compared = files, cells[0]
    else:  # two cells: of one file, or of two
        names = cells if args.first == args.second else [f"{f} {c}" for f, c in zip(files, cells, strict=True)]
        compared = f"{names[0]} against {names[1]}"
    print(f"{compared}, {len(seeds)} paired seeds {seeds[0]}-{seeds[-1]}")
    print(f"{args.metric}: {names[0]} / {names[1]} = {ratio:.3f} [95% CI {low:.3f}-{high:.3f}]")
    for name, cell in zip(names, (a, b), strict=True):
        wins = sum(cell[s]["success"] for s in seeds)
        lo, hi = wilson_interval(wins, len(seeds))
        print(f"success {name}: {100 * wins / len(seeds):.0f}% [{100 * lo:.0f}-{100 * hi:.0f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
