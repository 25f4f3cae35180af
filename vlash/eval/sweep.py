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
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field, replace
from multiprocessing import get_context

import numpy as np

from robot_io.executors import EXECUTION_MODES, ExecutorConfig
from vlash.errors import ConfigError, VlashError
from vlash.eval.episode import EpisodeRunner, executor_config
from vlash.eval.link import LinkTiming
from vlash.eval.metrics import EpisodeMetrics, aggregate, episode_metrics
from vlash.planar_arm import forward
from vlash.policies.names.source import ORACLE
from vlash.sampling.guidance_weight_bounds import DEFAULT_GUIDANCE_WEIGHT, check_guidance_weight
from vlash.sim import make_env
from vlash.sim.env import TASKS
from vlash.sim.errors import SimConfigError
from vlash.sim.settings import SimSettings

# Seeds: results are tuned on the development split and reported on the report split, never the other way round
SEED_SPLITS = {"dev": 0, "report": 100_000}


class SweepWorkerError(VlashError):
    """A worker process could not set up or run an episode; the message says which and why, in one line."""


@dataclass(frozen=True)
class SweepConfig:
    """A sweep of execution modes x inference delays (`vlash eval`'s flags are generated from these fields). The
    task, the cells against the policy's chunk and the policy itself are checked by `check_sweep`."""

    task: str = field(metadata={"choices": TASKS})  # simulated task
    policy: str  # "oracle" or a policy directory
    modes: tuple[str, ...] = ("sync", "naive", "vlash", "faster")  # execution modes compared
    delays: tuple[int, ...] = (0, 2, 4)  # inference delays d in control steps
    episodes: int = 50  # episodes per (mode, delay)
    # s, q, state source and mode-specific knobs (its mode is replaced per cell)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    # the simulated link's timing model (its delay is replaced per cell)
    timing: LinkTiming = field(default_factory=lambda: LinkTiming(delay=0))
    seed: int = 0  # first episode seed
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)  # worker processes (1: in this process)
    sim: SimSettings = field(default_factory=SimSettings)  # the simulator: interface, disturbance, arm, camera
    # rtc with a learned policy: the largest guidance weight (beta; `vlash serve --guidance-weight`)
    guidance_weight: float = DEFAULT_GUIDANCE_WEIGHT

    def __post_init__(self) -> None:
        if not self.modes or not self.delays:
            raise ConfigError(f"a sweep needs at least one mode and one delay, got modes={self.modes} "
                              f"delays={self.delays}")  # fmt: skip
        for mode in self.modes:
            if mode not in EXECUTION_MODES:
                raise ConfigError(f"modes: each mode must be one of {EXECUTION_MODES}, got {mode!r}")
        for name in ("episodes", "workers"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
        check_guidance_weight(self.guidance_weight)


_WORKER: dict = {}


def load_chunk_policy(policy: str, threads: int = 1, guidance_weight: float = DEFAULT_GUIDANCE_WEIGHT):
    """The ChunkPolicy a name stands for: the scripted-expert oracle, or a policy directory (torch on
    `threads` CPU threads, one per worker process in a sweep; rtc's largest guidance weight)."""
    if policy == ORACLE:
        from vlash.eval.policies import OraclePolicy  # extra: sim, server

        return OraclePolicy()
    import torch  # extra: server

    from vlash.eval.policies import LearnedPolicy  # extra: sim, server
    from vlash.policies.formats.loading import load_policy  # extra: server

    torch.set_num_threads(threads)
    return LearnedPolicy(load_policy(policy), guidance_weight=guidance_weight)


def _build(policy: str, task: str, sim: SimSettings, guidance_weight: float):
    return make_env(task, seed=0, settings=sim), load_chunk_policy(policy, guidance_weight=guidance_weight)


def _init_worker(
    policy: str, task: str, sim: SimSettings, built=None, guidance_weight: float = DEFAULT_GUIDANCE_WEIGHT
) -> None:
    """Build this worker's environment and policy. In a pool it must not raise (that breaks the pool and hides
    the reason): the error is kept and reported by the worker's first job."""
    _WORKER.clear()
    try:
        _WORKER["env"], _WORKER["policy"] = built if built is not None else _build(policy, task, sim, guidance_weight)
    except Exception as exc:  # any failure: reported as one line by _run_job
        _WORKER["error"] = f"worker setup ({policy}, {task}): {_one_line(exc)}"
        return
    _WORKER["fk"] = arm_fk(_WORKER["env"])


def arm_fk(env) -> Callable[[np.ndarray], np.ndarray]:
    """The environment's arm's forward kinematics (joints -> end effector), for the episode metrics."""
    links = env.arm_config.link_lengths
    return lambda q: forward(q, links)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if isinstance(exc, VlashError) else f"{type(exc).__name__}: {text}"


Job = tuple[str, ExecutorConfig, LinkTiming, int]  # (task, the cell's executor settings and link timing, seed)


def _run_job(job: Job) -> EpisodeMetrics:
    task, executor, timing, seed = job
    if "error" in _WORKER:
        raise SweepWorkerError(_WORKER["error"])
    env, policy = _WORKER["env"], _WORKER["policy"]
    try:
        trace = EpisodeRunner(env, policy, executor, timing, task).run(seed)
        return episode_metrics(trace, _WORKER["fk"])
    except Exception as exc:  # sent back to the parent as one picklable line, not a remote traceback
        raise SweepWorkerError(f"{task} {executor.mode} d={timing.delay} seed {seed}: {_one_line(exc)}") from exc


def cell_configs(cfg: SweepConfig) -> list[tuple[ExecutorConfig, LinkTiming]]:
    """(executor settings, link timing) of every (mode, delay) cell, in table order."""
    return [(replace(cfg.executor, mode=m), replace(cfg.timing, delay=d))
            for m, d in itertools.product(cfg.modes, cfg.delays)]  # fmt: skip


def jobs_for(cfg: SweepConfig) -> list[Job]:
    return [(cfg.task, ex, timing, cfg.seed + i) for ex, timing in cell_configs(cfg) for i in range(cfg.episodes)]


def check_cell(executor: ExecutorConfig, delay: int, horizon: int) -> None:
    """ConfigError unless the chunk holds what the mode needs at this delay: sync s indices; the async modes that wait
    for the whole chunk d <= s and (s + d) q; faster at least (s + 1) q (its wait is shorter); ensemble d q < H."""
    s, q, mode = executor.execution_horizon, executor.action_stride, executor.mode
    executor.check_chunk_length(horizon)
    if mode == "ensemble" and delay * q >= horizon:
        raise ConfigError(f"d * q = {delay * q} chunk indices, the policy's chunk has {horizon}: a reply would "
                          "arrive after the chunk it aligns with ended")  # fmt: skip
    if mode in ("naive", "vlash", "prefix", "rtc"):
        if delay > s:
            raise ConfigError(f"delay {delay} > execution horizon {s} (the next chunk would arrive after "
                              "the current one ran out); lower --delays or raise --execution-horizon")  # fmt: skip
        if (s + delay) * q > horizon:
            raise ConfigError(f"(s + d) * q = {(s + delay) * q} chunk indices needed at d = {delay}, "
                              f"the policy's chunk has {horizon}")  # fmt: skip


def check_sweep(cfg: SweepConfig):
    """Check the sweep in this process before any worker starts; returns the loaded policy (ConfigError /
    CheckpointError naming what is wrong: the task, a mode, a delay or horizon the policy's chunk cannot hold,
    a policy that does not load)."""
    if cfg.task not in TASKS:
        raise ConfigError(f"unknown task {cfg.task!r}; choose one of {', '.join(TASKS)}")
    try:
        cells = cell_configs(cfg)  # every cell's ExecutorConfig and LinkTiming validate themselves
    except ValueError as exc:
        raise ConfigError(str(exc)) from None

    try:
        env = make_env(cfg.task, seed=0, settings=cfg.sim)  # the task's settings are checked when its env is built
    except SimConfigError as exc:
        raise ConfigError(f"simulator settings: {exc}") from None
    policy = load_chunk_policy(cfg.policy, guidance_weight=cfg.guidance_weight)
    check_action_interface(policy.action_interface, env.action_interface, cfg.policy)
    check_state(policy.state_names, policy.state_dims, env.state_names, cfg.policy)
    for executor, timing in cells:
        try:
            check_cell(executor, timing.delay, policy.horizon)
            executor_config(executor, timing.delay, env.action_interface, cfg.seed)  # as each episode builds it
        except ValueError as exc:  # ShapeError from the executor's own check, ExecutorConfig's ValueError
            raise ConfigError(f"{executor.mode} d={timing.delay}: {exc}") from None
    return policy


def check_action_interface(trained: str | None, interface: str, name: str) -> None:
    """ConfigError when the actions a policy was trained for (ChunkPolicy.action_interface) are not what the
    sweep's simulator takes: a velocity policy on the default position arm would be driven to nonsense, not
    fail. None (the oracle, a policy without a record) passes."""
    if trained is not None and trained != interface:
        raise ConfigError(
            f"{name} was trained with {trained} actions but the simulator takes {interface} actions: pass the "
            f"settings it was trained in (--sim-config {trained}, or a YAML; its config.yaml lists them under "
            "metadata.sim)"
        )


def check_state(names: list[str] | None, dims: int | None, observed: list[str], name: str) -> None:
    """ConfigError when the state a policy was trained on (ChunkPolicy.state_names, else its size) is not the one
    the sweep's simulator observes (SimSettings.observe adds entries). None (the oracle) passes."""
    trained = f"the state {names}" if names is not None else f"a state of {dims} entries"
    if (names is not None and list(names) != list(observed)) or (dims is not None and dims != len(observed)):
        raise ConfigError(
            f"{name} was trained on {trained} but the simulator observes {observed}: pass the settings it was "
            "trained in (--sim-config velocity-observable, say, or a YAML; its config.yaml lists them under "
            "metadata.sim)"
        )


def timed_sweep(cfg: SweepConfig):
    """(the sweep with its link timing the policy's sampler, the policy), every setting checked (check_sweep)."""
    policy = check_sweep(cfg)
    return replace(cfg, timing=replace(cfg.timing, num_steps=policy.num_steps)), policy


def run_sweep(cfg: SweepConfig, progress: Callable[[int, int], None] | None = None) -> list[EpisodeMetrics]:
    cfg, policy = timed_sweep(cfg)
    jobs = jobs_for(cfg)
    results: list[EpisodeMetrics] = []
    if cfg.workers <= 1:
        env = make_env(cfg.task, seed=0, settings=cfg.sim)
        _init_worker(cfg.policy, cfg.task, cfg.sim, built=(env, policy))
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
            initargs=(cfg.policy, cfg.task, cfg.sim, None, cfg.guidance_weight),
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
    settings = {**asdict(cfg), "sim": cfg.sim.to_dict()}
    notes = faster_notes(cfg) if "faster" in cfg.modes else []
    return {"settings": settings, "cells": cells, "notes": notes, "episodes": [e.to_dict() for e in episodes]}


def faster_notes(cfg: SweepConfig) -> list[str]:
    """Why faster's rows repeat: it waits only for its first actions, which arrive after the prefill and one denoise
    step, d * fraction(1) control steps after a request, seen at the next step; delays with the same wait run the
    same episodes."""
    waits: dict[int, list[int]] = {}
    for delay in cfg.delays:
        timing = replace(cfg.timing, delay=delay)
        waits.setdefault(math.ceil(delay * timing.fraction(1) - 1e-9), []).append(delay)
    share = cfg.timing.fraction(1)
    return [
        f"faster at d = {', '.join(map(str, ds))}: the same episodes: it waits only for its first actions, which "
        f"arrive after the prefill and one denoise step (d x {share:.3f} control steps), i.e. {wait} step(s) at each"
        for wait, ds in waits.items()
        if len(ds) > 1
    ]
