"""One figure comparing how the execution modes fare under inference delay with different action interfaces:
a panel per `vlash eval --json` result (its title from --titles), success rate (95% interval) against d.

    python tools/plot_interfaces.py docs/eval/report/oracle-hold.json.gz \
        docs/eval/report/oracle-velocity-load-hold.json.gz \
        --titles "hold, positions" "hold, velocities + load 0.3" --modes sync,naive,vlash,faster --out FIG.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vlash.atomic import atomic_write
from vlash.eval.report import read_summary, success_bars


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, nargs="+", help="vlash eval --json files, one panel each")
    p.add_argument("--titles", nargs="+", required=True, help="one title per result")
    p.add_argument("--modes", default="sync,naive,vlash,faster", help="comma-separated modes to draw")
    p.add_argument("--out", type=Path, required=True, help="PNG to write")
    args = p.parse_args(argv)
    if len(args.titles) != len(args.results):
        p.error(f"{len(args.results)} results but {len(args.titles)} titles")
    try:
        summaries = [read_summary(path) for path in args.results]
    except (OSError, ValueError) as exc:
        p.error(str(exc))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for m in args.modes.split(",") if m]
    fig, axes = plt.subplots(1, len(args.results), figsize=(4 * len(args.results), 3.6), sharey=True,
                             constrained_layout=True, squeeze=False)  # fmt: skip
    for ax, summary, title in zip(axes[0], summaries, args.titles, strict=True):
        cells = summary["cells"]
        for mode in modes:
            mine = sorted((c for c in cells if c["mode"] == mode), key=lambda c: c["delay"])
            if not mine:
                continue
            rate, err = success_bars(mine)
            ax.errorbar([c["delay"] for c in mine], rate, yerr=err, marker="o", capsize=3, label=mode)
        ax.set(title=title, xlabel="inference delay d (control steps)", ylim=(-3, 103))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("success rate (%), 95% CI")
    axes[0][-1].legend(fontsize=8, loc="best")  # where it covers the fewest points
    atomic_write(args.out, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
