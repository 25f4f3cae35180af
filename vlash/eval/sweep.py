"""Run episodes over modes x delays, in parallel worker processes, and collect their metrics.

Each worker builds the environment and the policy once (the policy is "oracle" or a policy directory)
and then runs (mode, delay, seed) jobs. Seeds are shared across cells, so every mode and delay sees the
same episodes.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context

from vlash.eval.episode import EpisodeRunner
from vlash.eval.metrics import EpisodeMetrics, aggregate, episode_metrics
from vlash.eval.modes import ExecutionConfig

ORACLE = "oracle"


@dataclass(frozen=True)
class SweepConfig:
    task: str  # simulation task name
    policy: str  # "oracle" or a policy directory
    modes: tuple[str, ...]  # execution modes
    delays: tuple[int, ...]  # inference delays d (control steps)
    episodes: int  # episodes per (mode, delay)
    execution: ExecutionConfig  # s, q and mode-specific knobs (its mode/delay are replaced per cell)
    seed: int = 0  # first episode seed
    workers: int = 2  # processes (1 = in this process)
    image_size: int = 96  # camera resolution


_WORKER: dict = {}


def load_chunk_policy(policy: str, threads: int = 1):
    """The ChunkPolicy a name stands for: the scripted-expert oracle, or a policy directory (torch on
    `threads` CPU threads; one per worker process in a sweep)."""
    if policy == ORACLE:
        from vlash.eval.policies import OraclePolicy

        return OraclePolicy()
    import torch

    from vlash.eval.policies import ModelPolicy
    from vlash.policies.policy_dir import load_policy

    torch.set_num_threads(threads)
    return ModelPolicy(load_policy(policy))


def _build(policy: str, task: str, image_size: int):
    from robot_io.sim import make_env

    return make_env(task, seed=0, image_size=image_size), load_chunk_policy(policy)


def _init_worker(policy: str, task: str, image_size: int) -> None:
    from robot_io.sim.kinematics import forward

    _WORKER["env"], _WORKER["policy"] = _build(policy, task, image_size)
    links = _WORKER["env"].arm_config.link_lengths
    _WORKER["fk"] = lambda q: forward(q, links)


def _run_job(job: tuple[str, ExecutionConfig, int]) -> EpisodeMetrics:
    task, cfg, seed = job
    env, policy = _WORKER["env"], _WORKER["policy"]
    trace = EpisodeRunner(env, policy, cfg, task).run(seed)
    return episode_metrics(trace, _WORKER["fk"])


def jobs_for(cfg: SweepConfig) -> list[tuple[str, ExecutionConfig, int]]:
    cells = [replace(cfg.execution, mode=m, delay=d) for m, d in itertools.product(cfg.modes, cfg.delays)]
    return [(cfg.task, c, cfg.seed + i) for c in cells for i in range(cfg.episodes)]


def run_sweep(cfg: SweepConfig, progress: Callable[[int, int], None] | None = None) -> list[EpisodeMetrics]:
    jobs = jobs_for(cfg)  # validates every cell's ExecutionConfig up front
    results: list[EpisodeMetrics] = []
    if cfg.workers <= 1:
        _init_worker(cfg.policy, cfg.task, cfg.image_size)
        for i, job in enumerate(jobs):
            results.append(_run_job(job))
            if progress:
                progress(i + 1, len(jobs))
        return results
    workers = min(cfg.workers, os.cpu_count() or 1, len(jobs))
    with ProcessPoolExecutor(
        workers,
        mp_context=get_context("spawn"),
        initializer=_init_worker,
        initargs=(cfg.policy, cfg.task, cfg.image_size),
    ) as pool:
        for i, metrics in enumerate(pool.map(_run_job, jobs, chunksize=max(1, len(jobs) // (8 * workers)))):
            results.append(metrics)
            if progress:
                progress(i + 1, len(jobs))
    return results


def summarize(cfg: SweepConfig, episodes: Sequence[EpisodeMetrics]) -> dict:
    cells = []
    for mode, delay in itertools.product(cfg.modes, cfg.delays):
        chosen = [e for e in episodes if e.mode == mode and e.delay == delay]
        cells.append({"mode": mode, "delay": delay, **aggregate(chosen)})
    settings = {**asdict(cfg), "execution": asdict(cfg.execution)}
    return {"settings": settings, "cells": cells, "episodes": [e.to_dict() for e in episodes]}
