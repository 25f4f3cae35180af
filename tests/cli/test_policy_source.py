"""One resolver for every command's --policy: what each kind of value resolves to, and the one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlash.errors import CheckpointError, ConfigError
from vlash.policies.names.shipped import available_shipped, shipped_policy_dir
from vlash.policies.names.source import (
    ARTIFACT_MANIFEST,
    ARTIFACT_POLICY_DIR,
    ORACLE,
    PolicyKind,
    read_policy_config,
    resolve_policy,
)
from vlash.policies.pi05 import load_preset

MICRO = Path(__file__).parents[1] / "train" / "pi05-micro.yaml"
SHIPPED = "pi05-tiny-sim"
needs_shipped = pytest.mark.skipif(SHIPPED not in available_shipped(), reason="checkpoints/ not in this install")


def test_names_and_the_oracle():
    assert resolve_policy(ORACLE).kind is PolicyKind.ORACLE
    preset = resolve_policy("pi05-tiny")
    assert preset.kind is PolicyKind.PRESET and not preset.random_weights and preset.config().name == "pi05-tiny"
    assert resolve_policy("pi05-tiny", random_weights=True).random_weights
    config_file = resolve_policy(str(MICRO))
    assert config_file.kind is PolicyKind.PRESET and config_file.path == MICRO and config_file.name == "pi05-micro"


@needs_shipped
def test_a_shipped_name_and_its_directory_are_the_same_policy():
    shipped = resolve_policy(SHIPPED)
    assert (shipped.kind, shipped.layout, shipped.path) == (PolicyKind.SHIPPED, "vlash", shipped_policy_dir(SHIPPED))
    directory = resolve_policy(str(shipped_policy_dir(SHIPPED)))
    assert (directory.kind, directory.layout, directory.name) == (PolicyKind.DIRECTORY, "vlash", SHIPPED)
    # the stored config, read without loading the weights: the preset it was trained as
    assert shipped.config() == directory.config()
    assert shipped.config().vision == load_preset(shipped.config().name).vision


def test_directories_by_their_files(tmp_path):
    lerobot = tmp_path / "lerobot"
    lerobot.mkdir()
    (lerobot / "policy_preprocessor.json").write_text("{}")
    source = resolve_policy(str(lerobot))
    assert (source.kind, source.layout) == (PolicyKind.DIRECTORY, "lerobot") and "LeRobot" in source.describe()
    with pytest.raises(CheckpointError, match="convert"):  # a config is only read from a vlash directory
        source.config()
    artifact = tmp_path / "artifact"
    (artifact / ARTIFACT_POLICY_DIR).mkdir(parents=True)
    (artifact / ARTIFACT_MANIFEST).write_text(json.dumps({}))
    assert resolve_policy(str(artifact)).kind is PolicyKind.ARTIFACT
    with pytest.raises(CheckpointError, match="not a policy directory"):
        resolve_policy(str(tmp_path / "lerobot" / ".."))  # a directory of directories


def test_artifact_file_names_match_the_engines_layer():
    from vlash.engines.artifact import MANIFEST, POLICY_DIR

    assert (ARTIFACT_MANIFEST, ARTIFACT_POLICY_DIR) == (MANIFEST, POLICY_DIR)


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ("./no_such_dir", CheckpointError, "no such directory"),  # a path is a path: no "unknown preset" for a typo
        ("pi07", ConfigError, "not a shipped policy .*pi05-tiny"),  # names every kind and what exists
        ("", ConfigError, "needs a value"),
    ],
)
def test_unknown_values_say_what_was_looked_for(value, error, match):
    with pytest.raises(error, match=match):
        resolve_policy(value)


def test_a_file_that_is_not_yaml_is_refused(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    with pytest.raises(CheckpointError, match="neither a policy directory nor a YAML"):
        resolve_policy(str(weights))


def test_random_weights_need_a_preset(tmp_path):
    with pytest.raises(ConfigError, match="drop --random-weights"):
        resolve_policy(ORACLE, random_weights=True)


def test_require_names_the_kind_and_what_the_command_takes():
    source = resolve_policy(ORACLE)
    assert source.require("eval", {PolicyKind.ORACLE: ""}) is source
    with pytest.raises(ConfigError) as caught:
        source.require("serve", {PolicyKind.SHIPPED: "", PolicyKind.PRESET: "with --random-weights"}, "a hint")
    message = str(caught.value)
    assert "'oracle' is the scripted-expert oracle" in message and "vlash serve takes a shipped policy" in message
    assert "a preset (with --random-weights)" in message and message.endswith("; a hint") and "\n" not in message


def test_read_policy_config_refuses_a_non_vlash_config(tmp_path):
    (tmp_path / "config.yaml").write_text("name: x\n")
    with pytest.raises(CheckpointError, match="no 'policy' section"):
        read_policy_config(tmp_path)
