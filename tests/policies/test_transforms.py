"""Policy transforms: a task-space policy sees and predicts end-effector positions (or velocities), the robot joints;
the transform is named in the policy directory and loaded only then."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vlash import planar_arm as kinematics
from vlash.errors import ShapeError
from vlash.policies.formats.loading import load_policy
from vlash.policies.formats.vlash_dir import save_policy
from vlash.policies.processing.normalization import FeatureNorm, Normalizer, NormMode
from vlash.policies.processing.processor import Observation, Pi05Processor
from vlash.policies.processing.task_space import PlanarArmTaskSpace, PlanarArmVelocityTaskSpace
from vlash.policies.processing.tokenizer import Pi05PromptEncoder, PromptTokenizer
from vlash.policies.processing.transforms import load_transform
from vlash.sim.config import ArmConfig

SPACE = PlanarArmTaskSpace.from_arm(ArmConfig())
VELOCITY = PlanarArmVelocityTaskSpace.from_arm(ArmConfig())
DT = ArmConfig().control_dt


def _chunk(start: np.ndarray, end: np.ndarray, steps: int = 20) -> np.ndarray:
    return np.linspace(start, end, steps).astype(np.float32)


@pytest.mark.parametrize("elbow", [1.3, -1.3])
def test_a_joint_chunk_survives_the_round_trip_on_its_own_elbow_branch(elbow):
    q = _chunk(np.array([0.2, elbow]), np.array([2.0, 0.5 * elbow]))
    positions = SPACE.to_model(q)
    np.testing.assert_allclose(positions, kinematics.forward(q, ArmConfig().link_lengths), atol=1e-6)
    back = SPACE.to_robot(positions, q[0])
    np.testing.assert_allclose(back, q, atol=1e-5)
    # started from the other branch, the same positions give the mirrored elbow
    mirrored = SPACE.to_robot(positions, q[0] * np.array([1.0, -1.0]))
    assert (np.sign(mirrored[:, 1]) == -np.sign(elbow)).all()
    np.testing.assert_allclose(SPACE.to_model(mirrored), positions, atol=1e-5)


def test_joint_0_stays_continuous_past_pi_and_batches_solve_each_row_from_its_own_start():
    q = _chunk(np.array([math.pi - 0.3, 1.0]), np.array([math.pi + 0.4, 1.2]))  # crosses +pi without a wrap
    batch = np.stack([q, q - np.array([2 * math.pi, 0.0], np.float32)])  # the same pose, 2 pi lower
    back = SPACE.to_robot(SPACE.to_model(batch), batch[:, 0])
    np.testing.assert_allclose(back, batch, atol=1e-5)
    assert np.abs(np.diff(back[..., 0], axis=-1)).max() < 0.1


def test_unreachable_positions_are_projected_and_bad_shapes_are_refused():
    far = np.array([[3.0, 0.0]], np.float32)
    q = SPACE.to_robot(far, np.array([0.0, 0.5]))
    np.testing.assert_allclose(SPACE.to_model(q)[0], [sum(ArmConfig().link_lengths), 0.0], atol=1e-4)
    with pytest.raises(ShapeError, match="2 joint values"):
        SPACE.to_model(np.zeros((4, 3)))
    with pytest.raises(ShapeError, match="need positions"):
        SPACE.to_robot(np.zeros((2, 5, 2)), np.zeros(2))
    with pytest.raises(ShapeError, match="link_lengths"):
        PlanarArmTaskSpace((0.5, -0.4), ((-1.0, 1.0), (-1.0, 1.0)))
    with pytest.raises(ShapeError, match="joint_limits"):
        PlanarArmTaskSpace((0.5, 0.4), ((1.0, -1.0), (-1.0, 1.0)))
    assert PlanarArmTaskSpace.from_dict(SPACE.to_dict()) == SPACE
    with pytest.raises(ShapeError, match="'scara'"):
        PlanarArmTaskSpace.from_dict({**SPACE.to_dict(), "kind": "scara"})


@pytest.mark.parametrize("elbow", [1.3, -1.3])
def test_a_joint_velocity_chunk_maps_to_the_end_effector_velocity_along_its_path_and_back(elbow):
    start = np.array([math.pi - 0.2, elbow], np.float32)  # joint 0 crosses +pi on the way
    velocities = np.stack([np.linspace(0.5, 2.5, 30), np.linspace(-0.8, 0.3, 30)], axis=1).astype(np.float32)
    ee = VELOCITY.actions_to_model(velocities, start)
    path = start + DT * np.cumsum(velocities.astype(np.float64), axis=0)
    # integrated from the start's end effector, the velocities reach the end effector of every joint on the path
    reached = kinematics.forward(start, ArmConfig().link_lengths) + DT * np.cumsum(ee.astype(np.float64), axis=0)
    np.testing.assert_allclose(reached, kinematics.forward(path, ArmConfig().link_lengths), atol=1e-5)
    np.testing.assert_allclose(VELOCITY.to_robot(ee, start), velocities, atol=1e-4)
    np.testing.assert_allclose(VELOCITY.to_model(start), kinematics.forward(start, ArmConfig().link_lengths), atol=1e-6)
    # batches: each chunk from its own start
    batch = VELOCITY.actions_to_model(np.stack([velocities, -velocities]), np.stack([start, start]))
    np.testing.assert_allclose(batch[0], ee)
    np.testing.assert_allclose(batch[1], VELOCITY.actions_to_model(-velocities, start))


def test_a_velocity_task_space_needs_the_start_its_period_and_its_kind():
    with pytest.raises(ShapeError, match="pass the state"):
        VELOCITY.actions_to_model(np.zeros((3, 2)))
    with pytest.raises(ShapeError, match="need a chunk"):
        VELOCITY.to_robot(np.zeros((2, 5, 2)), np.zeros(2))
    with pytest.raises(ShapeError, match="control_dt"):
        PlanarArmVelocityTaskSpace(SPACE, 0.0)
    assert load_transform(VELOCITY.to_dict()) == VELOCITY and load_transform(SPACE.to_dict()) == SPACE
    with pytest.raises(ShapeError, match="needs control_dt"):
        PlanarArmVelocityTaskSpace.from_dict({**SPACE.to_dict(), "kind": "planar_arm_velocity"})
    with pytest.raises(ShapeError, match="'planar_arm'"):
        PlanarArmVelocityTaskSpace.from_dict(SPACE.to_dict())


def _normalizer() -> Normalizer:
    q = lambda lo, hi: {"q01": np.array(lo, np.float32), "q99": np.array(hi, np.float32)}  # noqa: E731
    return Normalizer(
        [
            FeatureNorm("observation.state", NormMode.QUANTILES, q([-0.9, -0.9], [0.9, 0.9])),
            FeatureNorm("action", NormMode.QUANTILES, q([-0.5, -0.4], [0.5, 0.6])),
        ]
    )


def _processor(config, tokenizer_dir, space: PlanarArmTaskSpace | None) -> Pi05Processor:
    encoder = Pi05PromptEncoder(PromptTokenizer.from_dir(tokenizer_dir), config.max_token_len, state_dims=2)
    return Pi05Processor(config, _normalizer(), encoder, action_dims=2, relative_mask=(True, True), transform=space)


def test_the_processor_gives_the_model_positions_and_the_robot_joints(tiny, tokenizer_dir):
    ee, joint = _processor(tiny.config, tokenizer_dir, SPACE), _processor(tiny.config, tokenizer_dir, None)
    states = np.array([[0.3, 1.1], [-2.0, -0.8]], np.float32)
    image = {"base_0_rgb": np.zeros((96, 96, 3), np.uint8)}
    # the prompt carries the end effector's position: what a joint-space processor makes of the FK'd state
    seen = ee.preprocess([Observation(image, s, "touch the red target") for s in states])
    positions = SPACE.to_model(states)
    expected = joint.preprocess([Observation(image, p, "touch the red target") for p in positions])
    assert torch.equal(seen.tokens, expected.tokens)
    # committed or guidance actions arrive as joints and are mapped before the relative offset and normalizing
    actions = np.stack([_chunk(s, s + np.array([0.4, -0.3]), 8) for s in states])
    model_actions = ee.to_model_actions(actions, states)
    np.testing.assert_allclose(model_actions, joint.to_model_actions(SPACE.to_model(actions), positions), atol=1e-6)
    # and the model's chunk comes back as joints on the state's branch, reaching the positions it predicted
    padded = torch.zeros(2, 8, tiny.config.action_dim)
    padded[..., :2] = torch.from_numpy(model_actions)
    np.testing.assert_allclose(ee.postprocess(padded, states), actions, atol=1e-4)
    with pytest.raises(ShapeError, match="relative to the state"):
        ee.postprocess(padded)
    with pytest.raises(ShapeError, match="acts on 2 action dims"):
        Pi05Processor(tiny.config, _normalizer(), ee.prompt_encoder, action_dims=3, transform=SPACE)


def test_the_processor_maps_committed_velocities_from_the_state_and_returns_joint_velocities(tiny, tokenizer_dir):
    encoder = Pi05PromptEncoder(PromptTokenizer.from_dir(tokenizer_dir), tiny.config.max_token_len, state_dims=2)
    processor = Pi05Processor(tiny.config, _normalizer(), encoder, action_dims=2, transform=VELOCITY)
    state = np.array([0.3, 1.1], np.float32)
    committed = np.full((4, 2), 0.5, np.float32)
    model = processor.to_model_actions(committed, state)
    expected = _normalizer().normalize("action", VELOCITY.actions_to_model(committed, state))
    np.testing.assert_allclose(model, expected, atol=1e-6)
    with pytest.raises(ShapeError, match="pass the state"):
        processor.to_model_actions(committed)
    padded = torch.zeros(1, 4, tiny.config.action_dim)
    padded[..., :2] = torch.from_numpy(model)
    np.testing.assert_allclose(processor.postprocess(padded, state[None])[0], committed, atol=1e-3)


def test_the_transform_is_saved_and_loaded(tmp_path, tiny, tokenizer_dir):
    tok = tokenizer_dir / "tokenizer.json"
    out = save_policy(tmp_path / "p", tiny, _normalizer(), tok, 2, 2, relative_mask=(1, 1), transform=SPACE)
    assert load_policy(out).processor.transform == SPACE
    velocity = save_policy(tmp_path / "v", tiny, _normalizer(), tok, 2, 2, transform=VELOCITY)
    assert load_policy(velocity).processor.transform == VELOCITY
    plain = save_policy(tmp_path / "q", tiny, _normalizer(), tok, 2, 2)
    assert load_policy(plain).processor.transform is None


def test_a_state_with_extras_keeps_them_past_the_transformed_joints(tiny, tokenizer_dir):
    """A state longer than the action (joint velocities, a target: SimSettings.observe) reaches the model with its
    joints in the transform's space and the extras as they are; the relative offset and the chunk back to joints
    use the joints alone."""
    q = lambda lo, hi: {"q01": np.array(lo, np.float32), "q99": np.array(hi, np.float32)}  # noqa: E731
    state_norm = FeatureNorm("observation.state", NormMode.QUANTILES, q([-0.9] * 5, [0.9] * 5))
    normalizer = Normalizer([state_norm, _normalizer().feature("action")])
    encoder = Pi05PromptEncoder(PromptTokenizer.from_dir(tokenizer_dir), tiny.config.max_token_len, state_dims=5)
    ee = Pi05Processor(tiny.config, normalizer, encoder, action_dims=2, relative_mask=(True, True), transform=SPACE)
    joint = Pi05Processor(tiny.config, normalizer, encoder, action_dims=2, relative_mask=(True, True))
    states = np.array([[0.3, 1.1, 0.5, -0.2, 0.7], [-2.0, -0.8, 0.0, 0.1, -0.4]], np.float32)
    model_states = np.concatenate([SPACE.to_model(states[:, :2]), states[:, 2:]], axis=1)
    image = {"base_0_rgb": np.zeros((96, 96, 3), np.uint8)}
    seen = ee.preprocess([Observation(image, s, "touch the red target") for s in states])
    expected = joint.preprocess([Observation(image, s, "touch the red target") for s in model_states])
    assert torch.equal(seen.tokens, expected.tokens)
    actions = np.stack([_chunk(s[:2], s[:2] + np.array([0.4, -0.3]), 8) for s in states])
    model_actions = ee.to_model_actions(actions, states)
    np.testing.assert_allclose(model_actions, ee.to_model_actions(actions, states[:, :2]), atol=1e-6)
    padded = torch.zeros(2, 8, tiny.config.action_dim)
    padded[..., :2] = torch.from_numpy(model_actions)
    np.testing.assert_allclose(ee.postprocess(padded, states), actions, atol=1e-4)


@pytest.mark.parametrize("space", [None, SPACE, VELOCITY], ids=["joints", "positions", "velocities"])
def test_postprocess_from_a_row_on_gives_those_rows_of_the_whole_chunk(tiny, tokenizer_dir, space):
    # the runtime converts a streamed piece with the rows before it as context: rows [first, H) as in the whole chunk
    processor = _processor(tiny.config, tokenizer_dir, space)
    state = np.array([[0.3, 1.1]], np.float32)
    model = torch.zeros(1, 12, tiny.config.action_dim)
    model[..., :2] = torch.from_numpy(np.random.default_rng(7).normal(0.0, 0.8, (1, 12, 2)).astype(np.float32))
    whole = processor.postprocess(model, state)
    for first in (0, 4, 11):
        assert np.array_equal(processor.postprocess(model, state, first=first), whole[:, first:])
    if space is VELOCITY:  # the rows before matter: converted alone, the same rows are another motion
        assert not np.allclose(processor.postprocess(model[:, 4:], state), whole[:, 4:], atol=1e-3)
