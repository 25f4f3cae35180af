"""The rollout half of the gate on the trained simulation policy (runs when checkpoints/pi05-tiny-sim exists)."""

from pathlib import Path

import pytest

from vlash.engines import create_engine
from vlash.policies.formats.loading import load_policy
from vlash.quant.api import open_quantized, quantize
from vlash.quant.calibration import FrameSpec
from vlash.quant.check import check_variant, is_trained

TRAINED = Path(__file__).resolve().parents[2] / "checkpoints" / "pi05-tiny-sim"


@pytest.mark.slow
@pytest.mark.skipif(not (TRAINED / "config.yaml").is_file(), reason="needs the trained checkpoints/pi05-tiny-sim")
def test_int8_keeps_sim_success_and_jerk(tmp_path):
    policy = load_policy(TRAINED)
    assert is_trained(policy)
    out = quantize(TRAINED, tmp_path / "int8", "torch-int8")
    candidate, _, scheme = open_quantized(out)
    reference = create_engine("torch", model=policy.model)
    held_out = FrameSpec(tasks=("reach",), episodes=2, frames_per_episode=2, held_out=True)
    result = check_variant(scheme, reference, candidate, policy, held_out=held_out, rollout_episodes=2)
    assert result.rollout is not None and result.rollout.episodes == 2 * len(policy.metadata["config"]["tasks"])
    assert result.passed, result.reasons
