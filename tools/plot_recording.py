"""A picture of a rerun recording (`vlash run --record`, `vlash demo --record`), for where no rerun viewer runs (the
README's figure: the viewer needs a screen and a GPU-backed window, which CI machines do not have). One column per
run in the file (the demo's modes; a run alone: one), read back with rerun's own reader
(robot_io.rerun_trace.read_recording):

    row 1  camera frames at a few steps
    row 2  measured (solid) and commanded (dashed) joints, a vertical line where each chunk took over, holds shaded
    row 3  each chunk's latency at the step its final message arrived

    vlash demo --modes sync,vlash --inject-latency-ms 150 --record demo.rrd
    python tools/plot_recording.py demo.rrd --out docs/demo-recording.png
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

from robot_io.rerun_trace import RerunError, read_recording
from vlash.atomic import atomic_write

FRAMES = 4  # camera frames shown per run
TOOK_OVER = re.compile(r"took over at step (\d+)")


def runs(recording: dict[str, dict[str, list]]) -> list[str]:
    """The roots of the runs in a recording ("" for a run recorded alone), in the order their entities appear."""
    roots: list[str] = []
    for entity in recording:
        if entity == "held" or entity.endswith("/held"):
            roots.append(entity[: -len("held")])
    return roots


def series(recording: dict, entity: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of a scalar entity."""
    columns = recording[entity]
    return np.asarray(columns["step"], float), np.asarray([v[0] for v in columns["Scalars:scalars"]], float)


def plot(recording: dict[str, dict[str, list]], out: Path, title: str) -> Path:
    import cv2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    roots = runs(recording)
    if not roots:
        raise ValueError("no run in this recording (no held series): was it written by vlash run / demo --record?")
    fig = plt.figure(figsize=(5.2 * len(roots), 7.2), constrained_layout=True)
    grid = fig.add_gridspec(3, len(roots), height_ratios=[1.1, 2.2, 1.0])
    for col, root in enumerate(roots):
        cameras = sorted(e for e in recording if e.startswith(f"{root}camera/"))
        strip = fig.add_subplot(grid[0, col])
        if cameras:
            frames = recording[cameras[0]]
            picks = np.linspace(0, len(frames["step"]) - 1, min(FRAMES, len(frames["step"]))).round().astype(int)
            tiles = [cv2.imdecode(np.frombuffer(frames["EncodedImage:blob"][i], np.uint8), cv2.IMREAD_COLOR)[..., ::-1]
                     for i in picks]  # fmt: skip
            strip.imshow(np.concatenate(tiles, axis=1))
            strip.set_title(f"{root.rstrip('/') or 'run'}: {cameras[0].rsplit('/', 1)[1]} at steps "
                            f"{', '.join(str(frames['step'][i]) for i in picks)}", fontsize=9)  # fmt: skip
        strip.axis("off")
        joints = fig.add_subplot(grid[1, col])
        measured = sorted(e for e in recording if e.startswith(f"{root}state/"))
        for i, entity in enumerate(measured):
            name = entity.rsplit("/", 1)[1]
            steps, values = series(recording, entity)
            joints.plot(steps, values, color=f"C{i}", lw=1.4, label=name)
            if f"{root}command/{name}" in recording:
                joints.plot(*series(recording, f"{root}command/{name}"), color=f"C{i}", lw=1, ls="--")
        for text in recording.get(f"{root}chunks", {}).get("TextLog:text", []):
            if match := TOOK_OVER.search(text[0]):
                joints.axvline(int(match.group(1)), color="0.75", lw=0.6, zorder=0)
        steps, held = series(recording, f"{root}held")
        joints.fill_between(steps, 0, 1, where=held > 0, step="mid", color="red", alpha=0.15,
                            transform=joints.get_xaxis_transform(), lw=0, label="held")  # fmt: skip
        joints.set(ylabel="joint (solid: measured, dashed: commanded)")
        joints.legend(fontsize=7, loc="upper right")
        latency = fig.add_subplot(grid[2, col], sharex=joints)
        if f"{root}latency_ms" in recording:
            latency.plot(*series(recording, f"{root}latency_ms"), "o", ms=3)
        latency.set(xlabel="control step (grey lines: a chunk took over)", ylabel="chunk latency [ms]")
    fig.suptitle(title)
    atomic_write(out, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recording", type=Path, help="an .rrd written by vlash run / demo --record")
    p.add_argument("--out", type=Path, required=True, help="PNG to write")
    p.add_argument("--title", default=None, help="figure title (default: the file's name)")
    args = p.parse_args(argv)
    if not args.recording.is_file():
        p.error(f"{args.recording}: no such file")
    try:
        recording = read_recording(args.recording)
        written = plot(recording, args.out, args.title or args.recording.name)
    except (RerunError, ValueError, OSError) as exc:
        p.error(str(exc))
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
