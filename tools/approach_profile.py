"""Where a policy's time to the target goes: steps until the end effector first comes within each radius.

For tasks with static targets (reach, whack). Each target is one segment: from the step it is shown (reach:
the start; whack: its pop-up) until it stops being the task's target (touched, expired or episode end). Per
segment the tool records the first step at which the end effector is within each radius of the target and
the closest approach. A policy that gets near fast and then creeps over the last few centimetres shows it
here as a large gap between the 0.1 and the touch-radius column.

    python tools/approach_profile.py --task reach --policies oracle,checkpoints/pi05-tiny-sim \
        --episodes 60 --json docs/eval/approach-reach.json --plot docs/eval/approach-reach.png
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from robot_io.executors import EXECUTION_MODES, ExecutorConfig
from vlash.atomic import atomic_write
from vlash.errors import ConfigError
from vlash.eval.episode import EpisodeRunner
from vlash.eval.link import LinkTiming
from vlash.eval.sweep import check_cell, load_chunk_policy

STATIC_TARGET_TASKS = ("reach", "whack")


@dataclass
class Segment:
    """One target: its distance to the end effector at every step it was the task's target."""

    distances: np.ndarray  # [T] world units, from the step the target was first the task's target
    touched: bool

    def first_within(self, radius: float) -> int | None:
        hits = np.flatnonzero(self.distances < radius)
        return int(hits[0]) if hits.size else None


@dataclass
class PolicyProfile:
    policy: str
    segments: list[Segment] = field(default_factory=list)
    successes: int = 0
    episodes: int = 0


def _touches(info: dict, target: np.ndarray) -> bool:
    """Whether this step touched `target` (reach also reports touches of the wrong targets)."""
    return any(ev["kind"] == "touch" and np.allclose(ev["xy"], target) for ev in info.get("events", ()))


def segments_of(infos: list[dict]) -> list[Segment]:
    """Split an episode's infos into target segments by the task's `target_xy` (None: no target). The step
    that touches a whack target already reports the next target (or none), so it closes the touched segment."""
    segments: list[Segment] = []
    target, ee, touched = None, [], False

    def close() -> None:
        if target is not None and ee:
            dist = np.hypot(*(np.asarray(ee, float) - target).T)
            segments.append(Segment(np.atleast_1d(dist), touched))

    for info in infos:
        xy = info.get("target_xy")
        if target is not None and (xy is None or not np.array_equal(xy, target)):
            if _touches(info, target):
                ee.append(info["ee_xy"])
                touched = True
            close()
            target, ee, touched = None, [], False
        if xy is not None:
            if target is None:
                target = np.asarray(xy, float)
            ee.append(info["ee_xy"])
            touched = touched or _touches(info, target)
    close()
    return segments


def profile(args: argparse.Namespace, env, progress: Progress | None = None) -> list[PolicyProfile]:
    """Run every policy on the same seeds in `env` and collect its target segments."""
    results = []
    for name in args.policies:
        policy = load_chunk_policy(name, threads=2)
        try:
            check_cell(args.executor, args.delay, policy.horizon)
        except ValueError as exc:  # ConfigError, or the executor's ShapeError
            raise ConfigError(f"approach_profile: {name}: {exc}") from None
        timing = LinkTiming(args.delay, num_steps=policy.num_steps)
        runner = EpisodeRunner(env, policy, args.executor, timing, args.task)
        bar = progress.add_task(name, total=args.episodes) if progress else None
        prof = PolicyProfile(name)
        for seed in range(args.seed, args.seed + args.episodes):
            trace = runner.run(seed)
            prof.segments += segments_of(trace.infos)
            prof.successes += trace.success
            prof.episodes += 1
            if progress:
                progress.advance(bar)
        results.append(prof)
    return results


def summarize(prof: PolicyProfile, radii: tuple[float, ...], dt: float) -> dict:
    n = len(prof.segments)
    cells = []
    for r in radii:
        steps = [s.first_within(r) for s in prof.segments]
        got = [k for k in steps if k is not None]
        cells.append(
            {
                "radius": r,
                "reached": len(got),
                "median_steps": float(np.median(got)) if got else None,
                "mean_s": float(np.mean(got)) * dt if got else None,
            }
        )
    missed = [float(s.distances.min()) for s in prof.segments if not s.touched]
    return {
        "policy": prof.policy,
        "episodes": prof.episodes,
        "successes": prof.successes,
        "targets": n,
        "touched": sum(s.touched for s in prof.segments),
        "radii": cells,
        "closest_approach_untouched_median": float(np.median(missed)) if missed else None,
    }


def distance_curves(prof: PolicyProfile, length: int) -> dict[str, list[float]]:
    """Median and quartiles of the distance over steps since the segment start (segments that ended earlier
    keep their last distance: a touched target stays touched)."""
    rows = [np.pad(s.distances[:length], (0, max(0, length - s.distances.size)), mode="edge") for s in prof.segments]
    q = np.percentile(np.stack(rows), [25, 50, 75], axis=0)
    return {"p25": q[0].tolist(), "median": q[1].tolist(), "p75": q[2].tolist()}


def plot(summaries: list[dict], path: Path, touch_radius: float, dt: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for summary in summaries:
        curves = summary["curves"]
        t = np.arange(len(curves["median"])) * dt
        ax.plot(t, curves["median"], label=f"{Path(summary['policy']).name} (median)")
        ax.fill_between(t, curves["p25"], curves["p75"], alpha=0.2)
    ax.axhline(touch_radius, color="k", linestyle=":", label=f"touch radius {touch_radius}")
    ax.set_xlabel("time since the target was shown (s)")
    ax.set_ylabel("end effector to target (world units)")
    ax.set_yscale("log")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="reach", choices=STATIC_TARGET_TASKS)
    p.add_argument("--policies", default="oracle", help="comma-separated: oracle and/or policy directories")
    p.add_argument("--mode", default="sync", choices=EXECUTION_MODES)
    p.add_argument("--delay", type=int, default=0)
    p.add_argument("--execution-horizon", type=int, default=10)
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--radii", default="0.3,0.15,0.1,0.06", help="comma-separated world-unit radii")
    p.add_argument("--curve-steps", type=int, default=60, help="length of the distance curves (steps)")
    p.add_argument("--image-size", type=int, default=96)
    p.add_argument("--json", type=Path)
    p.add_argument("--plot", type=Path)
    args = p.parse_args(argv)
    args.policies = [x for x in args.policies.split(",") if x]
    args.radii = tuple(float(x) for x in args.radii.split(",") if x)
    if args.episodes < 1 or not args.policies or not args.radii:
        raise ConfigError("approach_profile: need >= 1 episode, >= 1 policy and >= 1 radius")
    if any(r <= 0 for r in args.radii):
        raise ConfigError(f"approach_profile: radii must be > 0, got {args.radii}")
    try:  # the episode sets the executor's initial d itself (EpisodeRunner); 1 fits every s
        args.executor = ExecutorConfig(mode=args.mode, execution_horizon=args.execution_horizon, initial_delay=1)
        LinkTiming(args.delay)
    except ValueError as exc:
        raise ConfigError(f"approach_profile: {exc}") from None
    return args


def _cell(cell: dict, targets: int) -> str:
    if cell["median_steps"] is None:
        return f"- (0/{targets})"
    return f"{cell['median_steps']:.0f} · {cell['mean_s']:.2f} s ({cell['reached']}/{targets})"


def _table(summaries: list[dict], radii: tuple[float, ...]) -> Table:
    table = Table(title="first step within each radius of the target (median steps · mean s; reached/targets)")
    table.add_column("policy")
    table.add_column("success")
    for r in radii:
        table.add_column(f"< {r}")
    table.add_column("untouched: closest (median)")
    for s in summaries:
        cells = [_cell(c, s["targets"]) for c in s["radii"]]
        closest = s["closest_approach_untouched_median"]
        closest_text = "-" if closest is None else f"{closest:.3f}"
        table.add_row(Path(s["policy"]).name, f"{s['successes']}/{s['episodes']}", *cells, closest_text)
    return table


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    from vlash.sim import make_env

    env = make_env(args.task, seed=0, image_size=args.image_size)
    dt, touch_radius = env.dt, env.task.config.touch_radius
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=True) as progress:
        profiles = profile(args, env, progress)
    summaries = [{**summarize(p, args.radii, dt), "curves": distance_curves(p, args.curve_steps)} for p in profiles]
    Console(width=140).print(_table(summaries, args.radii))
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "plot", "executor")}
        result = {"settings": settings, "policies": summaries}
        atomic_write(args.json, lambda f: f.write(json.dumps(result, indent=1).encode()))
    if args.plot:
        plot(summaries, args.plot, touch_radius, dt)


if __name__ == "__main__":
    main()
