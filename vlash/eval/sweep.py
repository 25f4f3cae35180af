"""Run episodes over modes x delays, in parallel worker processes, and collect their metrics.

Each worker builds the environment and the policy once (the policy is "oracle" or a policy directory)
and then runs (mode, delay, seed) jobs. Seeds are shared across cells, so every mode and delay sees the
same episodes.

Everything a worker could find wrong is checked here first (`check_sweep`: the task, every cell's settings
against the policy's chunk, the policy loading), so a bad argument is one line before any worker starts. A
worker's own failure comes back as a one-line `SweepWorkerError`: an initializer that raised would break the
pool, and the user would read a `BrokenProcessPool` traceback instead of the reason.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context

from vlash.errors import ConfigError, VlashError
from vlash.eval.episode import EpisodeRunner
from vlash.eval.metrics import EpisodeMetrics, aggregate, episode_metrics
from vlash.eval.modes import ExecutionConfig
from vlash.policies.policy_source import ORACLE


class SweepWorkerError(VlashError):
    """A worker process could not set up or run an episode; the message says which and why, in one line."""


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


def _init_worker(policy: str, task: str, image_size: int, built=None) -> None:
    """Build this worker's environment and policy. In a pool it must not raise (that breaks the pool and hides
    the reason): the error is kept and reported by the worker's first job."""
    from robot_io.sim.kinematics import forward

    _WORKER.clear()
    try:
        _WORKER["env"], _WORKER["policy"] = built if built is not None else _build(policy, task, image_size)
    except Exception as exc:  # any failure: reported as one line by _run_job
        _WORKER["error"] = f"worker setup ({policy}, {task}): {_one_line(exc)}"
        return
    links = _WORKER["env"].arm_config.link_lengths
    _WORKER["fk"] = lambda q: forward(q, links)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if isinstance(exc, VlashError) else f"{type(exc).__name__}: {text}"


def _run_job(job: tuple[str, ExecutionConfig, int]) -> EpisodeMetrics:
    task, cfg, seed = job
    if "error" in _WORKER:
        raise SweepWorkerError(_WORKER["error"])
    env, policy = _WORKER["env"], _WORKER["policy"]
    try:
        trace = EpisodeRunner(env, policy, cfg, task).run(seed)
        return episode_metrics(trace, _WORKER["fk"])
    except Exception as exc:  # sent back to the parent as one picklable line, not a remote traceback
        raise SweepWorkerError(f"{task} {cfg.mode} d={cfg.delay} seed {seed}: {_one_line(exc)}") from exc


def jobs_for(cfg: SweepConfig) -> list[tuple[str, ExecutionConfig, int]]:
    cells = [replace(cfg.execution, mode=m, delay=d) for m, d in itertools.product(cfg.modes, cfg.delays)]
    return [(cfg.task, c, cfg.seed + i) for c in cells for i in range(cfg.episodes)]


def check_sweep(cfg: SweepConfig):
    """Check the sweep in this process before any worker starts; returns the loaded policy (ConfigError /
    CheckpointError naming what is wrong: the task, a mode, a delay or horizon the policy's chunk cannot hold,
    a policy that does not load)."""
    from robot_io.sim.env import TASKS

    if cfg.task not in TASKS:
        raise ConfigError(f"unknown task {cfg.task!r}; choose one of {', '.join(TASKS)}")
    if not cfg.modes or not cfg.delays:
        raise ConfigError(f"a sweep needs at least one mode and one delay, got modes={cfg.modes} delays={cfg.delays}")
    if cfg.episodes < 1:
        raise ConfigError(f"episodes must be >= 1, got {cfg.episodes}")
    jobs = jobs_for(cfg)  # every cell's ExecutionConfig validates itself
    policy = load_chunk_policy(cfg.policy)
    for cell in dict.fromkeys(job[1] for job in jobs):
        cell.check_horizon(policy.horizon)
    return policy


def run_sweep(cfg: SweepConfig, progress: Callable[[int, int], None] | None = None) -> list[EpisodeMetrics]:
    policy = check_sweep(cfg)
    jobs = jobs_for(cfg)
    results: list[EpisodeMetrics] = []
    if cfg.workers <= 1:
        from robot_io.sim import make_env

        env = make_env(cfg.task, seed=0, image_size=cfg.image_size)
        _init_worker(cfg.policy, cfg.task, cfg.image_size, built=(env, policy))
        for i, job in enumerate(jobs):
            results.append(_run_job(job))
            if progress:
                progress(i + 1, len(jobs))
        return results
    del policy  # each worker loads its own
    workers = min(cfg.workers, os.cpu_count() or 1, len(jobs))
    try:
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
    except BrokenProcessPool:  # a worker died without a Python error (killed, out of memory)
        raise SweepWorkerError(
            f"a worker process died (killed? out of memory?) after {len(results)} of {len(jobs)} episodes; "
            "--workers 1 runs them in this process"
        ) from None
    return results


def summarize(cfg: SweepConfig, episodes: Sequence[EpisodeMetrics]) -> dict:
    cells = []
    for mode, delay in itertools.product(cfg.modes, cfg.delays):
        chosen = [e for e in episodes if e.mode == mode and e.delay == delay]
        cells.append({"mode": mode, "delay": delay, **aggregate(chosen)})
    settings = {**asdict(cfg), "execution": asdict(cfg.execution)}
    return {"settings": settings, "cells": cells, "episodes": [e.to_dict() for e in episodes]}
