"""The sweep checks its arguments in the parent before any worker starts, and a worker's failure comes back as one
line (a SweepWorkerError), never a BrokenProcessPool traceback."""

from __future__ import annotations

import shutil
from concurrent.futures.process import BrokenProcessPool

import pytest

from robot_io.executors import ExecutorConfig
from vlash.errors import CheckpointError, ConfigError
from vlash.eval import sweep
from vlash.eval.link import LinkTiming
from vlash.eval.policies import OraclePolicy
from vlash.eval.sweep import (
    ORACLE,
    SEED_SPLITS,
    SweepConfig,
    SweepWorkerError,
    check_cell,
    check_sweep,
    jobs_for,
    run_sweep,
)
from vlash.policies.names.shipped import available_shipped, shipped_policy_dir

pytestmark = pytest.mark.sim


def config(**changes) -> SweepConfig:
    base = {
        "task": "reach",
        "policy": ORACLE,
        "modes": ("sync",),
        "delays": (0,),
        "episodes": 1,
        "executor": ExecutorConfig(mode="sync"),
        "timing": LinkTiming(0),
        "workers": 2,
    }
    return SweepConfig(**{**base, **changes})


@pytest.fixture
def no_pool(monkeypatch):
    """Fail the test if a worker pool is started."""

    def refuse(*args, **kwargs):
        raise AssertionError("a worker pool started before the arguments were checked")

    monkeypatch.setattr(sweep, "ProcessPoolExecutor", refuse)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"task": "fly"}, "unknown task 'fly'; choose one of reach"),
        ({"modes": ("sync", "warp")}, "mode must be one of"),
        ({"modes": ("naive",), "delays": (12,)}, "delay 12 > execution horizon 10"),
        ({"modes": ("naive",), "executor": ExecutorConfig(execution_horizon=48), "delays": (4,)}, r"\(s \+ d\) \* q"),
        ({"executor": ExecutorConfig(mode="sync", execution_horizon=50)}, r"\(s \+ 1\) \* q .* chunk has 50"),
        ({"delays": ()}, "at least one mode and one delay"),
    ],
)
def test_bad_sweeps_fail_in_the_parent(no_pool, changes, match):
    with pytest.raises(ConfigError, match=match):
        run_sweep(config(**changes))


@pytest.mark.skipif("pi05-tiny-sim" not in available_shipped(), reason="checkpoints/ not in this install")
def test_a_truncated_checkpoint_fails_in_the_parent(no_pool, tmp_path):
    policy = tmp_path / "truncated"
    shutil.copytree(shipped_policy_dir("pi05-tiny-sim"), policy)
    weights = policy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="cannot read"):
        check_sweep(config(policy=str(policy)))


@pytest.mark.skipif("pi05-tiny-sim" not in available_shipped(), reason="checkpoints/ not in this install")
def test_a_policy_on_a_simulator_of_other_actions_fails_in_the_parent(no_pool, tmp_path):
    import yaml

    policy = tmp_path / "velocity"
    shutil.copytree(shipped_policy_dir("pi05-tiny-sim"), policy)
    doc = yaml.safe_load((policy / "config.yaml").read_text())
    doc["metadata"]["sim"] = {"action_interface": "velocity"}  # as vlash train records it
    (policy / "config.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="trained with velocity actions but the simulator takes position actions"):
        run_sweep(config(policy=str(policy)))  # the default simulator: positions


def test_a_worker_setup_failure_is_one_line_from_the_real_pool(monkeypatch):
    """Bypass the parent's check so a spawned worker's initializer fails: its first job reports why."""
    monkeypatch.setattr(sweep, "check_sweep", lambda cfg: OraclePolicy())
    with pytest.raises(SweepWorkerError) as caught:
        run_sweep(config(task="fly"))
    message = str(caught.value)
    assert "worker setup (oracle, fly)" in message and "unknown task 'fly'" in message and "\n" not in message


def test_an_episode_failure_names_the_episode(monkeypatch):
    cfg = config()
    sweep._init_worker(cfg.policy, cfg.task, cfg.sim)
    monkeypatch.setattr(sweep, "EpisodeRunner", lambda *a: (_ for _ in ()).throw(RuntimeError("boom\nat line 2")))
    with pytest.raises(SweepWorkerError, match=r"^reach sync d=0 seed 7: RuntimeError: boom at line 2$"):
        sweep._run_job(("reach", ExecutorConfig(mode="sync"), LinkTiming(0), 7))


def test_a_commanded_state_with_relative_actions_fails_in_the_parent(no_pool):
    from vlash.sim.settings import SimSettings

    commanded = ExecutorConfig(mode="naive", state_source="commanded")
    with pytest.raises(ConfigError, match="needs absolute actions"):
        run_sweep(config(modes=("naive",), executor=commanded, sim=SimSettings(action_interface="velocity")))


def test_an_ensemble_delay_past_the_chunk_fails_in_the_parent(no_pool):
    with pytest.raises(ConfigError, match="chunk has 50"):
        run_sweep(config(modes=("ensemble",), delays=(50,)))


def test_every_cell_runs_the_same_seeds_with_its_own_mode_and_delay():
    executor, timing = ExecutorConfig(mode="sync", action_stride=2), LinkTiming(0, prefill_share=0.3)
    cfg = config(modes=("sync", "faster"), delays=(0, 3), episodes=2, seed=SEED_SPLITS["report"], executor=executor,
                 timing=timing)  # fmt: skip
    jobs = jobs_for(cfg)
    cells = {(ex.mode, timing.delay): [seed for _, e, t, seed in jobs if (e.mode, t.delay) == (ex.mode, timing.delay)]
             for _, ex, timing, _ in jobs}  # fmt: skip
    assert cells == {cell: [100_000, 100_001] for cell in [("sync", 0), ("sync", 3), ("faster", 0), ("faster", 3)]}
    assert all(ex.action_stride == 2 and timing.prefill_share == 0.3 for _, ex, timing, _ in jobs)


def test_a_worker_that_dies_is_one_line(monkeypatch):
    class DeadPool:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            return None

        def map(self, *args, **kwargs):
            raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(sweep, "ProcessPoolExecutor", DeadPool)
    with pytest.raises(SweepWorkerError, match="a worker process died .* --workers 1"):
        run_sweep(config())


@pytest.mark.parametrize("action_stride", [1, 2, 3])
@pytest.mark.parametrize("mode", ["naive", "vlash", "prefix", "rtc", "ensemble"])
def test_the_sweep_accepts_exactly_the_delays_the_executor_plans_with(mode, action_stride):
    executor, horizon = ExecutorConfig(mode=mode, execution_horizon=5, action_stride=action_stride), 50
    bound = executor.max_delay(horizon)  # what the robot's delay estimate is clamped to
    for delay in range(0, 60):
        if delay <= bound:
            check_cell(executor, delay, horizon)
        else:
            with pytest.raises(ConfigError):
                check_cell(executor, delay, horizon)


def test_rtcs_guidance_weight_reaches_the_learned_policy_in_the_parent_and_in_each_worker():
    """--guidance-weight: checked in the parent, given to the learned policy there and in every worker process."""
    with pytest.raises(ConfigError, match=r"guidance_weight must be in \(0, 1000\]"):
        config(guidance_weight=0.0)
    policy = str(shipped_policy_dir("pi05-tiny-sim"))
    cfg = config(policy=policy, guidance_weight=0.5)
    assert check_sweep(cfg).runtime.guidance_weight == 0.5
    sweep._init_worker(cfg.policy, cfg.task, cfg.sim, None, cfg.guidance_weight)
    assert sweep._WORKER["policy"].runtime.guidance_weight == 0.5
