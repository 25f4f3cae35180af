"""tools/bench_vs_lerobot.py's parts that run without LeRobot: the arguments, the sizes it gives both sides, the
re-randomization rule, the made-up stats and the rows with their references. The tool itself needs LeRobot 0.6.1
(Python 3.12): .ci/lerobot_lane.sh runs its --smoke mode."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
import torch

from tests.tools.tool_loader import load_tool
from vlash.policies.pi05.config import config_from_dict

tool = load_tool("bench_vs_lerobot")
build = importlib.import_module("bench_vs_lerobot_build")  # the modules the tool imported (tools/ on sys.path)
report = importlib.import_module("bench_vs_lerobot_report")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--depth", "0"], "--depth: "),
        (["--tolerance", "0"], "tolerances must be > 0"),
        (["--bf16-tolerance", "nan"], "tolerances must be > 0"),
        (["--pipeline-tolerance", "-1"], "tolerances must be > 0"),
    ],
)
def test_bad_arguments_are_refused(capsys, args, message):
    with pytest.raises(SystemExit):
        tool.parse_args(args)
    assert message in capsys.readouterr().err


def test_smoke_runs_every_row_once_at_the_tiny_sizes():
    args = tool.parse_args(["--smoke", "--rounds", "7"])
    assert (args.rounds, args.warmup, args.pipeline, args.bf16, args.sizes) == (1, 0, True, True, build.TINY)
    full = tool.parse_args(["--depth", "3", "--vision-depth", "4"])
    assert full.sizes == build.real_widths(3, 4) and not full.bf16 and full.rounds == 10


def test_real_widths_are_pi05s_at_the_depth_given():
    config = config_from_dict(build.real_widths(2, 3).vlash_dict())
    assert (config.vision.width, config.vision.mlp_dim, config.vision.num_heads, config.vision.depth) == (
        1152, 4304, 16, 3)  # fmt: skip
    assert config.vision.num_patches == 256 and config.vocab_size == build.VOCAB
    assert (config.vlm.width, config.vlm.mlp_dim, config.vlm.depth, config.vlm.head_dim) == (2048, 16384, 2, 256)
    assert (config.expert.width, config.expert.mlp_dim, config.expert.num_kv_heads) == (1024, 4096, 1)
    tiny = config_from_dict(build.TINY.vlash_dict())
    assert tiny.vision.num_patches == 196 and tiny.vlm.width == 64  # the tiny fixture's sizes


def test_rerandomize_draws_every_weight_seeded():
    model = torch.nn.ModuleDict({"proj": torch.nn.Linear(256, 64), "ada": torch.nn.ModuleDict()})
    model["ada"]["dense"] = torch.nn.Linear(256, 64)
    torch.nn.init.zeros_(model["ada"]["dense"].weight)
    build.rerandomize(model, seed=1)
    assert abs(model["proj"].weight.std().item() * math.sqrt(256) - 1) < 0.05  # N(0, 1) / sqrt(fan_in)
    assert abs(model["ada"]["dense"].weight.std().item() * math.sqrt(256) - 0.5) < 0.05  # adaRMS: x 0.5
    assert 0.05 < (model["proj"].bias.detach().std().item()) < 0.4
    again = torch.nn.ModuleDict({"proj": torch.nn.Linear(256, 64), "ada": torch.nn.ModuleDict()})
    again["ada"]["dense"] = torch.nn.Linear(256, 64)
    again.load_state_dict({k: torch.zeros_like(v) for k, v in model.state_dict().items()})
    build.rerandomize(again, seed=1)
    assert torch.equal(again["proj"].weight, model["proj"].weight)  # the >= 2-D draw does not depend on the init


def test_made_up_stats_have_ordered_quantiles_for_state_and_action():
    stats = build.made_up_stats(seed=2)
    assert set(stats) == {"observation.state", "action"}
    for s in stats.values():
        quantiles = np.stack([s[k] for k in ("q01", "q10", "q50", "q90", "q99")])
        assert quantiles.shape == (5, build.ACTION_DIMS) and np.all(np.diff(quantiles, axis=0) > 0)
        assert np.all(s["min"] < s["q01"]) and np.all(s["q99"] < s["max"]) and np.all(s["std"] > 0)


def test_each_row_is_compared_with_its_own_lerobot_row():
    times = {"lerobot fp32": [10.0, 20.0], "vlash torch fp32": [5.0, 20.0], "lerobot bf16": [4.0, 4.0],
             "vlash torch bf16": [2.0, 1.0]}  # fmt: skip
    refs = {"lerobot fp32": ("lerobot fp32", "model"), "vlash torch fp32": ("lerobot fp32", "model"),
            "lerobot bf16": ("lerobot bf16", "bf16"), "vlash torch bf16": ("lerobot bf16", "bf16")}  # fmt: skip
    diffs = {"lerobot fp32": 0.0, "vlash torch fp32": 6e-7, "lerobot bf16": 0.0, "vlash torch bf16": 0.015}
    rows = {r["row"]: r for r in report.summarize(times, refs, diffs)}
    assert rows["vlash torch fp32"]["vs_reference"]["median"] == 0.75  # per-round ratios 0.5, 1.0
    assert rows["vlash torch bf16"]["vs_reference"]["median"] == 0.375  # 0.5, 0.25: against lerobot bf16
    assert rows["lerobot bf16"]["vs_reference"]["median"] == 1.0
    table = report.markdown(list(rows.values()))
    assert "| vlash torch bf16 | 1.5 | " in table and "| 0.015 (normalized) |" in table


def test_bf16_drift_is_measured_from_lerobot_fp32():
    fp32 = np.zeros((1, 2, 3), np.float32)
    actions = {"lerobot fp32": fp32, "lerobot bf16": fp32 + 0.01, "vlash torch bf16": fp32 - 0.03}
    drift = tool.bf16_drift(actions)
    assert drift == pytest.approx({"lerobot bf16": 0.01, "vlash torch bf16": 0.03})
    assert tool.bf16_drift({"lerobot fp32": fp32}) == {}
