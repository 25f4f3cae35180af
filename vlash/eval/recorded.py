"""`vlash eval --record FILE.rrd`: the first episodes of every cell again, logged to rerun the way `vlash run
--record` logs a robot (robot_io.rerun_trace), each under MODE/dD/seedS, in simulated time.

An episode is deterministic given its seed (vlash.eval.episode), so replaying the first `per_cell` seeds of each
(mode, delay) cell in this process gives the very episodes the sweep measured, without routing camera frames out of
the sweep's worker processes; the cost is those few episodes once more. The summary logged with each is its
metrics (vlash.eval.metrics), the numbers the table aggregates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from robot_io.rerun_trace import RerunRecording, RerunTrace
from vlash.eval.episode import EpisodeRunner
from vlash.eval.metrics import episode_metrics
from vlash.eval.sweep import SweepConfig, arm_fk, cell_configs, timed_sweep
from vlash.sim import make_env


def record_episodes(
    cfg: SweepConfig, path: Path, per_cell: int, progress: Callable[[int, int], None] | None = None
) -> Path:
    """Run the first `per_cell` seeds of each cell of `cfg` again into a rerun recording at `path`."""
    cfg, policy = timed_sweep(cfg)  # as run_sweep times the link
    env = make_env(cfg.task, seed=0, settings=cfg.sim)
    fk = arm_fk(env)
    names = (list(env.state_names), list(env.action_names))
    seeds = range(cfg.seed, cfg.seed + min(per_cell, cfg.episodes))
    total, done = len(cell_configs(cfg)) * len(seeds), 0
    with RerunRecording(f"vlash eval {cfg.task}", path=path) as recording:
        for executor, timing in cell_configs(cfg):
            for seed in seeds:
                root = f"{executor.mode}/d{timing.delay}/seed{seed}"
                trace = RerunTrace(recording, root, names, keep_every_frame=True)  # simulated time: no deadline
                episode = EpisodeRunner(env, policy, executor, timing, cfg.task).run(seed, traces=[trace])
                trace.summary(asdict(episode_metrics(episode, fk)))
                trace.close()  # one worker thread at a time
                done += 1
                if progress:
                    progress(done, total)
    return path
