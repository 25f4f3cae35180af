"""`vlash convert --from openpi-jax`: openpi's own tiny pi0.5 parameters (the parity fixture) saved as an orbax
checkpoint the way openpi saves them, converted through the command line, act as openpi's JAX model did."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from tests.checkpoints.layouts import Stats, write_openpi_jax
from tests.policies.builders import train_wordlevel_tokenizer
from tests.policies.openpi_fixture import load_reference
from vlash.cli.main import main
from vlash.policies.formats.loading import load_policy
from vlash.sampling import FlowSampler, SamplerConfig

pytest.importorskip("orbax.checkpoint", reason="the openpi extra (orbax-checkpoint) is not installed")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    ref = load_reference()
    root = tmp_path_factory.mktemp("openpi")
    stats = Stats.random(state_dims=8, action_dims=7, seed=9)
    checkpoint = write_openpi_jax(root / "pi05_dummy", ref.params, stats, asset_id="droid")
    sizes = {k: v for k, v in ref.config.to_dict().items() if k in ("vision", "vlm", "expert", "vocab_size")}
    (root / "dummy.yaml").write_text(yaml.safe_dump({"name": "openpi-dummy", **sizes}))
    tokenizer = train_wordlevel_tokenizer(root / "tok")
    out = root / "converted"
    argv = ["convert", "--from", "openpi-jax", str(checkpoint), "--out", str(out), "--tokenizer", str(tokenizer)]
    argv += ["--model-config", str(root / "dummy.yaml"), "--action-horizon", str(ref.config.action_horizon)]
    assert main(argv) == 0
    return ref, checkpoint, out, stats


def test_the_converted_model_samples_openpis_actions(converted):
    ref, _, out, _ = converted
    model = load_policy(out).model
    inputs = ref.inputs()  # openpi's prompts of 48 tokens; pi0.5 takes 200: the rest is padding, masked out
    extra = model.config.max_token_len - inputs.tokens.shape[1]
    inputs.tokens = torch.nn.functional.pad(inputs.tokens, (0, extra))
    inputs.token_masks = torch.nn.functional.pad(inputs.token_masks, (0, extra))
    cache = model.prefill(inputs)
    sampler = FlowSampler(SamplerConfig(num_steps=ref.config.num_steps, schedule="constant"))
    with torch.no_grad():
        result = sampler.sample(lambda x, tau: model.denoise_step(x, tau, cache), torch.from_numpy(ref["inputs/noise"]))
    assert np.abs(result.actions.numpy() - ref["outputs/actions"]).max() < 1e-3


def test_the_converted_directory_keeps_the_assets_and_the_provenance(converted):
    _, checkpoint, out, stats = converted
    policy = load_policy(out)
    assert policy.metadata["source"] == "openpi-jax" and policy.metadata["asset_id"] == "droid"
    assert policy.processor.action_dims == 7 and policy.processor.prompt_encoder.state_in_prompt
    q99 = policy.processor.normalizer.feature("action").stats["q99"]
    np.testing.assert_array_equal(q99, stats.action_q99)
    written = json.loads((checkpoint / "assets" / "droid" / "norm_stats.json").read_text())
    assert written["norm_stats"]["state"]["q01"] == pytest.approx(stats.state_q01.tolist())


def test_a_bad_checkpoint_fails_in_one_line_and_writes_nothing(tmp_path, capsys, converted):
    _, checkpoint, _, _ = converted
    out = tmp_path / "out"
    assert main(["convert", "--from", "openpi-jax", str(checkpoint), "--out", str(out), "--tokenizer", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "vlash convert: error:" in err, err
    assert not out.exists()
    (tmp_path / "empty").mkdir()
    assert main(["convert", "--from", "openpi-jax", str(tmp_path / "empty"), "--out", str(out)]) == 2
    assert "neither an openpi checkpoint" in capsys.readouterr().err
