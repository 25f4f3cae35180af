import json

import pytest
import torch

from vlash.errors import CheckpointError
from vlash.policies.formats.loading import load_policy
from vlash.policies.quantized.linear import Int4WeightLinear, Int8WeightLinear
from vlash.policies.quantized.manifest import MANIFEST_NAME, QuantManifest
from vlash.quant.api import open_quantized, quantize


def _manifest(**changes):
    fields = dict(
        scheme="torch-int4",
        engine="torch",
        base={"policy": "p", "model_sha256": "ab", "source": "/x"},
        layers={"vlm.layers.0.mlp.up_proj": {"dtype": "int4", "granularity": "group", "group_size": 32}},
        kept=["action_in_proj"],
        calibration={"source": "vlash.sim", "tasks": ["reach"], "seeds": [0], "frames": 4},
        files={"model": "model.safetensors"},
    )
    return QuantManifest(**{**fields, **changes})


def test_manifest_round_trip(tmp_path):
    manifest = _manifest()
    manifest.write(tmp_path)
    assert QuantManifest.read(tmp_path) == manifest
    assert json.loads((tmp_path / MANIFEST_NAME).read_text())["format"] == "vlash.quant/1"


@pytest.mark.parametrize(
    "changes",
    [
        {"scheme": "int3"},
        {"engine": "tflite"},
        {"layers": {"x": {"dtype": "int2"}}},
        {"layers": {"x": {"dtype": "int4", "granularity": "group"}}},  # no group_size
        {"format": "vlash.quant/0"},
    ],
)
def test_invalid_manifests_are_checkpoint_errors(changes):
    with pytest.raises(CheckpointError):
        _manifest(**changes)


def test_unknown_field_is_rejected(tmp_path):
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({**_manifest().to_dict(), "bits": 4}))
    with pytest.raises(CheckpointError, match=r"unknown quant manifest keys \['bits'\]"):
        QuantManifest.read(tmp_path)


def test_torch_int4_artifact_loads_through_load_policy(micro_policy_dir, tmp_path):
    out = quantize(micro_policy_dir, tmp_path / "int4", "torch-int4", group_size=16)
    manifest = QuantManifest.read(out)
    model = load_policy(out).model
    assert model.quant_scheme == "torch-int4"
    for name, spec in manifest.layers.items():
        module = model.get_submodule(name)
        assert isinstance(module, Int4WeightLinear if spec["dtype"] == "int4" else Int8WeightLinear)
    # defaults from the literature: 4 bits only on the VLM side, expert attention kept in float
    assert all(spec["dtype"] == "int8" for name, spec in manifest.layers.items() if name.startswith("expert."))
    assert "expert.layers.0.self_attn.q_proj" in manifest.kept
    assert isinstance(model.expert.layers[0].self_attn.q_proj, torch.nn.Linear)
    assert manifest.base["model_sha256"] and manifest.files == {"model": "model.safetensors"}
    engine, _, scheme = open_quantized(out)
    assert scheme == "torch-int4" and engine.describe()["quant"] == "torch-int4"


def test_quantizing_a_quantized_directory_is_refused(micro_policy_dir, tmp_path):
    out = quantize(micro_policy_dir, tmp_path / "int8", "torch-int8")
    with pytest.raises(CheckpointError, match="already quantized"):
        quantize(out, tmp_path / "again", "torch-int8")


def test_cli_scheme_list_matches_the_registry():
    from vlash.cli.quantize_cmd import SCHEME_NAMES
    from vlash.policies.quantized.schemes import SCHEMES

    assert tuple(SCHEMES) == SCHEME_NAMES
