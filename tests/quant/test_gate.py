"""The fidelity gate: thresholds, verdicts, the table, and int8 on pi05-tiny above the gate."""

import pytest

from vlash.engines import create_engine
from vlash.errors import ConfigError
from vlash.policies.formats.loading import load_policy
from vlash.policies.quantized.manifest import QuantManifest
from vlash.quant.api import open_quantized, quantize
from vlash.quant.calibration import FrameSpec
from vlash.quant.check import GateResult, check_variant, format_table
from vlash.quant.fidelity import ActionFidelity, GateThresholds, action_gate
from vlash.quant.rollout import RolloutStats, rollout_gate

HELD_OUT = FrameSpec(tasks=("reach",), episodes=1, frames_per_episode=1, held_out=True)


def _fidelity(cosine=0.999, max_abs=0.01):
    return ActionFidelity(
        observations=4, cosine_min=cosine, cosine_mean=cosine, max_abs_error=max_abs, mean_abs_error=0
    )


def test_thresholds_validate():
    with pytest.raises(ConfigError):
        GateThresholds(min_cosine=1.5)
    with pytest.raises(ConfigError):
        GateThresholds(max_abs_error=float("nan"))


@pytest.mark.parametrize(
    ("fidelity", "failed"),
    [(_fidelity(), 0), (_fidelity(cosine=0.98), 1), (_fidelity(max_abs=0.5), 1), (_fidelity(0.9, 0.5), 2)],
)
def test_action_gate(fidelity, failed):
    assert len(action_gate(fidelity, GateThresholds())) == failed


def test_nan_metrics_fail_the_gate():
    assert action_gate(_fidelity(cosine=float("nan"), max_abs=float("nan")), GateThresholds())


def test_rollout_gate_success_drop_and_jerk():
    ref = RolloutStats(episodes=12, success_rate=0.75, jerk=10.0)
    assert rollout_gate(ref, RolloutStats(12, 0.70, 11.0), 0.10, 1.5) == []
    assert "success" in rollout_gate(ref, RolloutStats(12, 0.50, 11.0), 0.10, 1.5)[0]
    assert "jerk" in rollout_gate(ref, RolloutStats(12, 0.75, 20.0), 0.10, 1.5)[0]


def test_table_marks_failures():
    good = GateResult("torch-int8", _fidelity())
    bad = GateResult("torch-int4", _fidelity(cosine=0.5), reasons=["cosine 0.5000 < 0.99"])
    table = format_table([good, bad])
    assert "PASS" in table.splitlines()[2] and "FAIL: cosine" in table.splitlines()[3]
    assert not bad.passed and bad.to_dict()["passed"] is False


@pytest.fixture(scope="module")
def tiny_int8(tiny_policy_dir, tmp_path_factory):
    return quantize(tiny_policy_dir, tmp_path_factory.mktemp("q") / "int8", "torch-int8")


def test_int8_fidelity_on_pi05_tiny_is_above_the_gate(tiny_policy_dir, tiny_int8):
    policy = load_policy(tiny_policy_dir)
    reference = create_engine("torch", model=policy.model)
    candidate, _, scheme = open_quantized(tiny_int8)
    result = check_variant(scheme, reference, candidate, policy, held_out=HELD_OUT)
    assert result.passed, result.reasons
    assert result.fidelity.cosine_min >= 0.99 and result.fidelity.max_abs_error < 0.01
    assert result.fidelity.observations == 1 and result.rollout is None  # random weights: no rollouts


def test_a_variant_failing_the_gate_is_reported_with_a_nonzero_exit(micro_policy_dir, tmp_path, capsys):
    from vlash.cli.main import main

    args = ["quantize", "--checkpoint", str(micro_policy_dir), "--scheme", "torch-int8", "--out", str(tmp_path / "q")]
    args += ["--check", "--held-out-episodes", "1", "--max-abs-error", "0", "--min-cosine", "1"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "torch-int8" in out
    assert "records its failed gate" in out and "--allow-failed-gate" in out  # what using it will take
    fidelity = QuantManifest.read(tmp_path / "q").fidelity  # the manifest records the failing check
    assert fidelity is not None and fidelity["passed"] is False and fidelity["thresholds"]["max_abs_error"] == 0
