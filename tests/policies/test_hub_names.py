"""Checkpoints and tokenizers named by Hugging Face repo id (`--checkpoint lerobot/pi05_tiny`, `--tokenizer
google/paligemma-3b-pt-224`, `--policy pi05` for pi0.5's base checkpoint), resolved from a hub cache built here:
nothing reaches the network (tests/conftest.py sets HF_HUB_OFFLINE)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.policies.hub_cache import write_hub_repo
from vlash.cli.checkpoint_args import check_checkpoint_files
from vlash.cli.main import main
from vlash.errors import CheckpointError, ConfigError
from vlash.policies.names.hub import PALIGEMMA_TOKENIZER, looks_like_hub_id
from vlash.policies.names.source import PolicyKind, resolve_policy, with_base_weights

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "examples" / "lerobot_pi05_tiny"
CHECKPOINT_FILES = sorted((SHIPPED / "pretrained_model").iterdir())
TOKENIZER_FILES = sorted((SHIPPED / "tokenizer").iterdir())


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_repo_ids_are_told_from_paths():
    for repo in ("lerobot/pi05_base", "google/paligemma-3b-pt-224", "a/b.c"):
        assert looks_like_hub_id(repo), repo
    for path in ("./a/b", "~/a/b", "/a/b", "a/b/c", "a", "a/", "/b", "a/b."):
        assert not looks_like_hub_id(path), path


def test_a_cached_repo_is_a_policy_directory_named_after_the_repo(cache):
    snapshot = write_hub_repo(cache, "lerobot/pi05_tiny", CHECKPOINT_FILES)
    source = resolve_policy("lerobot/pi05_tiny", flag="--checkpoint")
    assert (source.kind, source.layout, source.path, source.hub_id) == (
        PolicyKind.DIRECTORY, "lerobot", snapshot, "lerobot/pi05_tiny"
    )  # fmt: skip
    assert source.name == "pi05_tiny"


def test_a_repo_that_is_neither_local_nor_cached_is_one_line_offline(cache):
    with pytest.raises(CheckpointError) as exc:
        resolve_policy("lerobot/pi05_nothing", flag="--checkpoint")
    text = str(exc.value)
    assert text.startswith("--checkpoint 'lerobot/pi05_nothing': no such local path") and "HF_HUB_OFFLINE" in text
    with pytest.raises(CheckpointError, match="no such directory or file"):
        resolve_policy("./lerobot/pi05_nothing")  # a path is only a path


def test_pi05_is_its_base_checkpoint_where_cached_and_the_preset_otherwise(cache):
    preset = resolve_policy("pi05")
    source, why_not = with_base_weights(preset)
    assert source is preset and "lerobot/pi05_base" in str(why_not) and "HF_HUB_OFFLINE" in str(why_not)
    write_hub_repo(cache, "lerobot/pi05_base", CHECKPOINT_FILES)
    source, why_not = with_base_weights(preset)
    assert (source.kind, source.layout, source.hub_id, why_not) == (
        PolicyKind.DIRECTORY,
        "lerobot",
        "lerobot/pi05_base",
        None,
    )
    assert with_base_weights(resolve_policy("pi05-tiny"))[0].kind is PolicyKind.PRESET  # no checkpoint of its own


def test_serve_pi05_without_its_weights_says_where_they_come_from(cache, capsys):
    assert main(["serve", "--policy", "pi05", "--bind", "tcp://127.0.0.1:0"]) == 2
    err = capsys.readouterr().err
    assert "lerobot/pi05_base" in err and "--random-weights" in err and err.count("\n") == 3  # three short lines


def _args(tokenizer: str | None) -> argparse.Namespace:
    return argparse.Namespace(tokenizer=None if tokenizer is None else Path(tokenizer), model_config=None)


def test_the_tokenizer_comes_from_its_repo_given_or_as_pi05s_default(cache):
    checkpoint = write_hub_repo(cache, "lerobot/pi05_tiny", [f for f in CHECKPOINT_FILES])
    with pytest.raises(ConfigError, match=f"no tokenizer.*{PALIGEMMA_TOKENIZER}"):
        check_checkpoint_files(_args(None), checkpoint, "lerobot")
    with pytest.raises(CheckpointError, match="--tokenizer 'google/paligemma-3b-pt-224': no such local path"):
        check_checkpoint_files(_args(PALIGEMMA_TOKENIZER), checkpoint, "lerobot")
    tokenizer = write_hub_repo(cache, PALIGEMMA_TOKENIZER, TOKENIZER_FILES)
    given = _args(PALIGEMMA_TOKENIZER)
    check_checkpoint_files(given, checkpoint, "lerobot")
    assert given.tokenizer == tokenizer
    default = _args(None)
    check_checkpoint_files(default, checkpoint, "lerobot")  # none given: pi0.5's own from the cache
    assert default.tokenizer == tokenizer
