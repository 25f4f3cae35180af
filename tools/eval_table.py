"""A markdown table of a `vlash eval --json` result: one row per mode, one column per delay; each cell
"success % [95% CI] · completion s" (completion over all episodes, failures counted at the time limit), or with
--jumps the mean largest boundary jump (rad) after it.

    python tools/eval_table.py docs/eval/report/oracle-hold.json.gz [--modes sync,naive,vlash] [--jumps]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vlash.eval.report import read_summary


def cell_text(cell: dict, jumps: bool) -> str:
    low, high = cell["ci95"]
    text = f"{100 * cell['success_rate']:.0f} [{100 * low:.0f}-{100 * high:.0f}] · {cell['completion_s']:.2f} s"
    return text + (f" · {cell['boundary_jump']:.2f}" if jumps else "")


def table(summary: dict, modes: list[str] | None = None, jumps: bool = False) -> str:
    cells = summary["cells"]
    delays = sorted({c["delay"] for c in cells})
    modes = modes or list(dict.fromkeys(c["mode"] for c in cells))
    lines = ["| mode | " + " | ".join(f"d = {d}" for d in delays) + " |", "|---" * (len(delays) + 1) + "|"]
    for mode in modes:
        row = {c["delay"]: cell_text(c, jumps) for c in cells if c["mode"] == mode}
        if row:
            lines.append(f"| {mode} | " + " | ".join(row.get(d, "-") for d in delays) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result", type=Path)
    p.add_argument("--modes", default=None, help="comma-separated modes, in this order (default: all)")
    p.add_argument("--jumps", action="store_true", help="add the mean largest boundary jump (rad)")
    args = p.parse_args(argv)
    modes = None if args.modes is None else [m for m in args.modes.split(",") if m]
    try:
        summary = read_summary(args.result)
    except (OSError, ValueError) as exc:
        p.error(f"{args.result}: {exc}")
    print(table(summary, modes, args.jumps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
