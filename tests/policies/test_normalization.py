"""Normalization math, zero-range safety, and the LeRobot / openpi / vlash stats file formats."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from tests.policies.builders import write_lerobot_processor_files
from vlash.errors import CheckpointError
from vlash.policies.formats.lerobot_pipeline import read_lerobot_pipeline
from vlash.policies.formats.stats_io import load_openpi_norm_stats, load_stats, save_stats
from vlash.policies.processing.normalization import (
    EpsRule,
    FeatureNorm,
    Normalizer,
    NormMode,
    StatsError,
)

Q_STATS = {"q01": [0.0, -2.0, 10.0], "q99": [4.0, 2.0, 20.0]}


def _feat(mode: str, stats: dict, **kw) -> FeatureNorm:
    return FeatureNorm("observation.state", NormMode(mode), {k: np.array(v) for k, v in stats.items()}, **kw)


# ----------------------------------------------------------------------------------------- math


@pytest.mark.parametrize("as_torch", [False, True])
def test_quantiles_exact_values_and_round_trip(as_torch: bool) -> None:
    f = _feat("QUANTILES", Q_STATS)
    x = np.array([[1.0, 0.0, 20.0], [0.0, -4.0, 15.0]], np.float32)
    want = np.array([[-0.5, 0.0, 1.0], [-1.0, -2.0, 0.0]], np.float32)  # (x - q01) / (q99 - q01) * 2 - 1
    xin = torch.from_numpy(x) if as_torch else x
    y = f.normalize(xin)
    assert isinstance(y, torch.Tensor) == as_torch
    np.testing.assert_allclose(np.asarray(y), want, atol=1e-6)
    np.testing.assert_allclose(np.asarray(f.unnormalize(y)), x, atol=1e-5)


def test_mean_std_and_min_max_exact_values() -> None:
    ms = _feat("MEAN_STD", {"mean": [1.0, -1.0], "std": [2.0, 0.5]})
    np.testing.assert_allclose(ms.normalize(np.array([5.0, -1.5])), [2.0, -1.0], rtol=1e-6)
    np.testing.assert_allclose(ms.unnormalize(np.array([2.0, -1.0])), [5.0, -1.5], rtol=1e-6)
    mm = _feat("MIN_MAX", {"min": [0.0, -1.0], "max": [10.0, 1.0]})
    np.testing.assert_allclose(mm.normalize(np.array([2.5, 1.0])), [-0.5, 1.0], rtol=1e-6)
    np.testing.assert_allclose(mm.unnormalize(np.array([-0.5, 1.0])), [2.5, 1.0], rtol=1e-6)


def test_eps_rules_follow_each_reference() -> None:
    stats = {"mean": [0.0], "std": [1e-3]}
    lerobot = _feat("MEAN_STD", stats, eps=1e-3)  # LeRobot: std + eps forward, std inverse
    assert lerobot.normalize(np.array([1.0]))[0] == pytest.approx(1.0 / 2e-3, rel=1e-5)
    assert lerobot.unnormalize(np.array([1.0]))[0] == pytest.approx(1e-3, rel=1e-5)
    openpi = _feat("MEAN_STD", stats, eps=1e-3, eps_rule=EpsRule.OPENPI)  # openpi: std + eps both ways
    assert openpi.unnormalize(np.array([1.0]))[0] == pytest.approx(2e-3, rel=1e-5)
    q = _feat("QUANTILES", {"q01": [0.0], "q99": [1.0]}, eps=0.5, eps_rule=EpsRule.OPENPI)
    assert q.normalize(np.array([1.5]))[0] == pytest.approx(1.0)  # 1.5 / (1 + 0.5) * 2 - 1
    assert _feat("QUANTILES", {"q01": [0.0], "q99": [1.0]}, eps=0.5).normalize(np.array([1.0]))[0] == 1.0


@pytest.mark.parametrize("rule", list(EpsRule))
def test_zero_range_stats_stay_finite(rule: EpsRule) -> None:
    for mode, stats in [
        ("QUANTILES", {"q01": [3.0, 0.0], "q99": [3.0, 1.0]}),
        ("MIN_MAX", {"min": [3.0, 0.0], "max": [3.0, 1.0]}),
        ("MEAN_STD", {"mean": [3.0, 0.0], "std": [0.0, 1.0]}),
    ]:
        f = _feat(mode, stats, eps_rule=rule, eps=1e-6)
        for x in (np.array([3.0, 0.5], np.float32), torch.tensor([3.5, 0.5])):
            y = f.normalize(x)
            assert np.all(np.isfinite(np.asarray(y))), (mode, rule, y)
            if not (mode == "MEAN_STD" and rule is EpsRule.LEROBOT):  # LeRobot's inverse drops eps: -> mean
                np.testing.assert_allclose(np.asarray(f.unnormalize(y)), np.asarray(x), atol=1e-3)
        # Any model output for a constant feature maps back to (about) the constant.
        for y in (np.array([-1.0, 0.0], np.float32), torch.tensor([1.0, 0.0])):
            assert np.asarray(f.unnormalize(y))[0] == pytest.approx(3.0, abs=1e-5)


@pytest.mark.parametrize("as_torch", [False, True])
def test_padded_dims_pass_through_and_short_input_fails(as_torch: bool) -> None:
    f = _feat("QUANTILES", Q_STATS)
    x = np.array([1.0, 0.0, 20.0, 7.0, -9.0], np.float32)  # 3 real dims + 2 padding
    xin = torch.from_numpy(x) if as_torch else x
    for y in (f.normalize(xin), f.unnormalize(xin)):
        assert tuple(y.shape) == (5,)
        np.testing.assert_array_equal(np.asarray(y)[3:], [7.0, -9.0])
    np.testing.assert_allclose(np.asarray(f.normalize(xin))[:3], [-0.5, 0.0, 1.0], atol=1e-6)
    with pytest.raises(StatsError, match="observation.state.*fewer than 3"):
        f.normalize(xin[:2])


def test_identity_and_integer_inputs() -> None:
    ident = FeatureNorm("observation.images.top", NormMode.IDENTITY)
    x = np.arange(6).reshape(2, 3)
    assert ident.normalize(x) is x
    y = _feat("QUANTILES", Q_STATS).normalize(np.array([1, 0, 20]))
    assert y.dtype == np.float32


def test_missing_stat_and_bad_values_name_the_key() -> None:
    with pytest.raises(StatsError, match=r"'observation.state'.*QUANTILES.*q99"):
        _feat("QUANTILES", {"q01": [0.0]})
    with pytest.raises(StatsError, match="std has negative"):
        _feat("MEAN_STD", {"mean": [0.0], "std": [-1.0]})
    with pytest.raises(StatsError, match="non-finite"):
        _feat("MIN_MAX", {"min": [0.0], "max": [np.nan]})
    with pytest.raises(StatsError, match="not numeric"):
        _feat("QUANTILES", {"q01": ["a"], "q99": [1.0]})
    with pytest.raises(StatsError, match="BOGUS"):
        FeatureNorm("k", "BOGUS")  # type: ignore[arg-type]


def test_normalizer_unknown_key_and_dict() -> None:
    n = Normalizer([_feat("QUANTILES", Q_STATS)])
    with pytest.raises(StatsError, match=r"'action'.*known keys.*observation.state"):
        n.normalize("action", np.zeros(3))
    out = n.normalize_dict({"observation.state": np.array([4.0, 2.0, 10.0]), "task": "pick"})
    np.testing.assert_allclose(out["observation.state"], [1.0, 1.0, -1.0])
    assert out["task"] == "pick"
    with pytest.raises(StatsError, match="given twice"):
        Normalizer([_feat("QUANTILES", Q_STATS), _feat("QUANTILES", Q_STATS)])


# ----------------------------------------------------------------------------------------- LeRobot


def test_lerobot_checkpoint_loads_and_normalizes(tmp_path: Path) -> None:
    write_lerobot_processor_files(tmp_path)
    n = read_lerobot_pipeline(tmp_path).normalizer
    assert set(n.keys) == {"observation.images.base_0_rgb", "observation.state", "action"}
    assert n.feature("observation.state").mode is NormMode.QUANTILES
    assert n.feature("observation.images.base_0_rgb").mode is NormMode.IDENTITY
    state = torch.tensor([[1.0, 3.0]])
    torch.testing.assert_close(n.normalize("observation.state", state), torch.tensor([[0.0, 1.0]]))
    # LeRobot unnormalize: (y + 1) * (q99 - q01) / 2 + q01; dim 2 has q99 == q01 -> stays at q01 = 5.
    act = n.unnormalize("action", np.array([[0.0, -1.0, 0.7]], np.float32))
    np.testing.assert_allclose(act, [[0.0, 0.0, 5.0]], atol=1e-6)
    img = torch.rand(1, 3, 4, 4)
    assert n.normalize("observation.images.base_0_rgb", img) is img


def test_lerobot_postprocessor_stats_win_for_the_action(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_lerobot_processor_files(tmp_path, post_shift=2.0)
    n = read_lerobot_pipeline(tmp_path).normalizer
    assert "differ" in caplog.text
    # post q99 = [3, 6, 7], q01 = [-1, 0, 5]: y = 1 maps to q99.
    np.testing.assert_allclose(n.unnormalize("action", np.ones(3, np.float32)), [3.0, 6.0, 7.0], atol=1e-6)


def test_lerobot_normalize_observation_keys_limits_observations(tmp_path: Path) -> None:
    write_lerobot_processor_files(tmp_path, only=["observation.images.base_0_rgb"])
    n = read_lerobot_pipeline(tmp_path).normalizer
    assert n.feature("observation.state").mode is NormMode.IDENTITY
    assert n.feature("action").mode is NormMode.QUANTILES


def test_lerobot_missing_stats_names_key_and_file(tmp_path: Path) -> None:
    write_lerobot_processor_files(tmp_path, drop="observation.state.q99")
    with pytest.raises(CheckpointError, match=r"step_3_normalizer_processor.safetensors.*observation.state.*q99"):
        read_lerobot_pipeline(tmp_path)


def test_lerobot_missing_files(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="policy_preprocessor.json"):
        read_lerobot_pipeline(tmp_path)
    write_lerobot_processor_files(tmp_path)
    (tmp_path / "policy_postprocessor_step_0_unnormalizer_processor.safetensors").unlink()
    with pytest.raises(StatsError, match="unnormalizer_processor.safetensors"):
        read_lerobot_pipeline(tmp_path)


# ----------------------------------------------------------------------------------------- openpi


def test_openpi_norm_stats_json(tmp_path: Path) -> None:
    stats = {
        "state": {"mean": [0.0, 1.0], "std": [1.0, 2.0], "q01": [-1.0, 0.0], "q99": [1.0, 2.0]},
        "actions": {"mean": [0.5], "std": [0.5], "q01": None, "q99": None},
    }
    (tmp_path / "norm_stats.json").write_text(json.dumps({"norm_stats": stats}))
    with pytest.raises(StatsError, match=r"norm_stats.json.*'action'.*q01"):
        load_openpi_norm_stats(tmp_path)  # QUANTILES needs q01/q99, the file has null
    stats["actions"].update(q01=[0.0], q99=[1.0])
    (tmp_path / "norm_stats.json").write_text(json.dumps({"norm_stats": stats}))
    n = load_openpi_norm_stats(tmp_path / "norm_stats.json")
    assert set(n.keys) == {"observation.state", "action"}
    # openpi: (x - q01) / (q99 - q01 + 1e-6) * 2 - 1
    np.testing.assert_allclose(n.normalize("observation.state", np.array([0.0, 2.0])), [0.0, 1.0], atol=1e-5)
    raw = load_openpi_norm_stats(tmp_path, mode=NormMode.MEAN_STD, key_map=None)
    np.testing.assert_allclose(raw.normalize("state", np.array([1.0, 5.0])), [1.0, 2.0], rtol=1e-5)


# ----------------------------------------------------------------------------------------- vlash format


def test_vlash_stats_round_trip(tmp_path: Path) -> None:
    n = Normalizer(
        [
            _feat("QUANTILES", Q_STATS),
            FeatureNorm("action", NormMode.MEAN_STD, {"mean": [1.0], "std": [2.0]}, 1e-6, EpsRule.OPENPI),
            FeatureNorm("observation.images.top", NormMode.IDENTITY),
        ]
    )
    path = save_stats(tmp_path, n)
    assert path == tmp_path / "stats.safetensors"
    assert [p.name for p in tmp_path.iterdir()] == ["stats.safetensors"]  # no temp file left behind
    back = load_stats(path)
    assert back.keys == n.keys
    for key in n.keys:
        a, b = n.feature(key), back.feature(key)
        assert (a.mode, a.eps, a.eps_rule) == (b.mode, b.eps, b.eps_rule)
        assert a.stats.keys() == b.stats.keys()
    x = np.array([1.0, 0.0, 20.0, 3.0], np.float32)
    np.testing.assert_array_equal(back.normalize("observation.state", x), n.normalize("observation.state", x))
    np.testing.assert_array_equal(back.unnormalize("action", x[:1]), n.unnormalize("action", x[:1]))


def test_vlash_stats_errors_name_file_and_key(tmp_path: Path) -> None:
    path = save_stats(tmp_path / "s.safetensors", Normalizer([_feat("QUANTILES", Q_STATS)]))
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(StatsError, match=r"s\.safetensors"):
        load_stats(path)
    meta = {"format": "vlash.stats/1", "features": json.dumps({"observation.state": {"mode": "QUANTILES"}})}
    save_file({"observation.state/q01": torch.zeros(3)}, str(path), metadata=meta)
    with pytest.raises(StatsError, match=r"s\.safetensors.*'observation.state'.*q99"):
        load_stats(path)
    save_file({"observation.state/q01": torch.zeros(3)}, str(path))
    with pytest.raises(StatsError, match="metadata format"):
        load_stats(path)
    with pytest.raises(StatsError, match="not found"):
        load_stats(tmp_path / "missing")
