"""Recording expert episodes in vlash.sim (skipped while the suite is not installed)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vlash.sim")

from vlash.train.episodes import record_episodes, success_rate  # noqa: E402
from vlash.train.errors import TrainError  # noqa: E402


def test_recording_is_deterministic_and_well_shaped():
    a = record_episodes("intercept", 2, seed=5, image_size=24, progress=False)
    b = record_episodes("intercept", 2, seed=5, image_size=24, progress=False)
    c = record_episodes("intercept", 2, seed=6, image_size=24, progress=False)
    assert len(a) == 2 and a[0].seed != a[1].seed
    for x, y in zip(a, b, strict=True):
        assert x.seed == y.seed and x.instruction == y.instruction
        np.testing.assert_array_equal(x.images, y.images)
        np.testing.assert_array_equal(x.actions, y.actions)
    assert a[0].seed != c[0].seed
    e = a[0]
    assert e.images.shape == (len(e), 24, 24, 3) and e.images.dtype == np.uint8
    assert e.states.shape == e.actions.shape == (len(e), 2) and e.actions.dtype == np.float32
    assert e.task == "intercept" and e.instruction
    assert 0.0 <= success_rate(a) <= 1.0


def test_expert_state_follows_the_commanded_targets():
    (e,) = record_episodes("reach", 1, seed=0, image_size=16, progress=False)
    # the servo tracks the commands closely: next observed state near the action just commanded
    assert np.abs(e.states[1:] - e.actions[:-1]).max() < 0.1


def test_the_tail_continues_the_expert_past_the_touch_and_settles_on_the_target():
    from vlash.planar_arm import forward
    from vlash.sim import make_env

    (e,) = record_episodes("reach", 1, seed=3, image_size=16, progress=False, tail=50)
    assert e.success and e.tail.shape == (50, 2) and e.tail.dtype == np.float32
    assert np.array_equal(e.labels, np.concatenate([e.actions, e.tail]))
    step = np.abs(np.diff(e.actions, axis=0)).max()
    assert np.abs(e.tail[0] - e.actions[-1]).max() <= step + 1e-6  # continues the motion without a jump
    env = make_env("reach", seed=0, image_size=16)
    env.reset(seed=e.seed)
    world, links = env.world, env.arm_config.link_lengths
    goal = world.positions[world.goal]
    touch = env.task.config.touch_radius
    end = [np.linalg.norm(forward(a, links) - goal) for a in (e.actions[-1], e.tail[-1])]
    assert end[1] < 0.2 * touch and end[1] < end[0]  # the labels end on the target's centre
    assert np.abs(e.tail[-1] - e.tail[-2]).max() < 1e-3  # at rest there
    (no_tail,) = record_episodes("reach", 1, seed=3, image_size=16, progress=False)
    assert no_tail.tail is None and np.array_equal(no_tail.labels, e.actions)


def test_plans_hold_only_what_each_frame_could_see():
    from vlash.sim import make_env

    (e,) = record_episodes("whack", 1, seed=0, image_size=16, progress=False, plan_steps=20)
    assert e.plans.shape == (len(e), 20, 2) and e.plans.dtype == np.float32
    (plain,) = record_episodes("whack", 1, seed=0, image_size=16, progress=False)
    for name in ("images", "states", "actions"):  # recording the plans leaves the episode as it was
        np.testing.assert_array_equal(getattr(e, name), getattr(plain, name))
    env = make_env("whack", seed=0, image_size=16)
    env.reset(seed=e.seed)
    pop = int(env.world.appear[1])  # the second target: the arm rests on the first when it pops up
    before = np.abs(e.plans[pop - 5] - e.actions[pop - 5 : pop + 15]).max(axis=1)
    assert before[:5].max() < 1e-4 and before[-1] > 0.5  # the commands turn to the new target, that plan cannot
    after = np.abs(e.plans[pop] - e.actions[pop : pop + 20]).max()
    assert after < 0.05  # once it is visible, plan and commands agree up to re-planning
    (reach,) = record_episodes("reach", 1, seed=0, image_size=16, progress=False, tail=50, plan_steps=20)
    assert max(np.abs(reach.plans[t] - reach.labels[t : t + 20]).max() for t in range(len(reach))) < 0.05


def test_unknown_task_is_a_clear_error():
    with pytest.raises(TrainError, match="unknown task"):
        record_episodes("juggle", 1, seed=0, progress=False)
