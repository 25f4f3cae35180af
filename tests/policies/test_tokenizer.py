"""Local tokenizer loading (tokenizers / sentencepiece) and the pi0.5 state-in-prompt encoding."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.policies.builders import SPECIALS, train_sentencepiece_tokenizer, train_wordlevel_tokenizer
from vlash.policies.processing.tokenizer import (
    Pi05PromptEncoder,
    PromptTokenizer,
    TokenizerError,
    discretize_state,
)


@pytest.fixture(scope="module")
def tok_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tok")
    return {"json": train_wordlevel_tokenizer(root / "json"), "sp": train_sentencepiece_tokenizer(root / "sp")}


@pytest.fixture(params=["json", "sp"])
def tokenizer(request: pytest.FixtureRequest, tok_dirs: dict[str, Path]) -> PromptTokenizer:
    return PromptTokenizer.from_dir(tok_dirs[request.param])


# ----------------------------------------------------------------------------------------- discretization


def test_discretize_state_matches_np_digitize_edges() -> None:
    state = np.array([-1.0, 1.0, 0.0, 1.5, -1.5, -1.0001, 0.99, 0.9921875, np.nan], np.float32)
    want = [0, 255, 128, 255, -1, -1, 254, 255, 255]  # below -1 -> -1 (openpi does not clamp it)
    got = discretize_state(state)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    ref = np.digitize(state, bins=np.linspace(-1, 1, 256 + 1)[:-1]) - 1
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(discretize_state(torch.from_numpy(state)), want)
    dense = np.linspace(-1.2, 1.2, 10_001)
    np.testing.assert_array_equal(discretize_state(dense), np.digitize(dense, np.linspace(-1, 1, 257)[:-1]) - 1)


# ----------------------------------------------------------------------------------------- loading


def test_tokenizers_json_finds_bos_and_never_doubles_it(tok_dirs: dict[str, Path]) -> None:
    tok = PromptTokenizer.from_dir(tok_dirs["json"])
    assert tok.bos_id == 2
    assert tok.vocab_size > len(SPECIALS)
    ids = tok.encode("Task: fold the towel", add_bos=True)
    assert ids[0] == 2 and ids.count(2) == 1
    assert tok.encode("Task: fold the towel", add_bos=False) == ids[1:]
    assert 0 not in ids  # the file's padding setting is switched off


def test_tokenizers_json_bos_from_config_or_argument(tmp_path: Path, tok_dirs: dict[str, Path]) -> None:
    d = tmp_path / "t"
    d.mkdir()
    (d / "tokenizer.json").write_bytes((tok_dirs["json"] / "tokenizer.json").read_bytes())
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": {"content": "<eos>"}}))
    assert PromptTokenizer.from_dir(d).bos_id == 1
    assert PromptTokenizer.from_dir(d, bos_token="<pad>").bos_id == 0
    assert PromptTokenizer.from_dir(d, bos_id=3).bos_id == 3
    with pytest.raises(TokenizerError, match="<nope>.*bos_id="):
        PromptTokenizer.from_dir(d, bos_token="<nope>")


def test_sentencepiece_model(tok_dirs: dict[str, Path]) -> None:
    import sentencepiece as spm

    tok = PromptTokenizer.from_dir(tok_dirs["sp"] / "tokenizer.model")
    ref = spm.SentencePieceProcessor(model_file=str(tok_dirs["sp"] / "tokenizer.model"))
    text = "Task: pick up the red cube, State: 0 128;\nAction: "
    assert tok.bos_id == 2
    assert tok.encode(text, add_bos=True) == ref.encode(text, add_bos=True)  # what openpi calls


def test_prefer_picks_between_files(tmp_path: Path, tok_dirs: dict[str, Path]) -> None:
    for name, src in (("tokenizer.json", "json"), ("tokenizer.model", "sp")):
        (tmp_path / name).write_bytes((tok_dirs[src] / name).read_bytes())
    assert PromptTokenizer.from_dir(tmp_path).source.name == "tokenizer.json"
    assert PromptTokenizer.from_dir(tmp_path, prefer="sentencepiece").source.name == "tokenizer.model"


def test_missing_tokenizer_lists_what_was_looked_for(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match=r"tokenizer\.json.*tokenizer\.model"):
        PromptTokenizer.from_dir(tmp_path)


def test_corrupt_tokenizer_files(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(TokenizerError, match="tokenizer.json"):
        PromptTokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    (tmp_path / "tokenizer.model").write_bytes(b"\x00garbage")
    with pytest.raises(TokenizerError, match="tokenizer.model"):
        PromptTokenizer.from_dir(tmp_path)


# ----------------------------------------------------------------------------------------- pi0.5 prompt


def test_pi05_prompt_text_and_ids(tokenizer: PromptTokenizer) -> None:
    enc = Pi05PromptEncoder(tokenizer, max_len=48)
    state = np.array([-1.0, 0.0, 1.0], np.float32)
    text = enc.format_prompt("  pick_up the\ncube ", state)
    assert text == "Task: pick up the cube, State: 0 128 255;\nAction: "
    ids, mask = enc.encode("  pick_up the\ncube ", state)
    want = tokenizer.encode(text, add_bos=True)
    assert ids.shape == mask.shape == (48,)
    assert ids.dtype == np.int64 and mask.dtype == np.bool_
    assert ids[0] == tokenizer.bos_id
    assert ids[: len(want)].tolist() == want
    assert mask.sum() == len(want) and mask[: len(want)].all()
    assert (ids[len(want) :] == 0).all()


def test_pi05_truncates_with_warning(tokenizer: PromptTokenizer, caplog: pytest.LogCaptureFixture) -> None:
    state = np.linspace(-1, 1, 32)
    full = tokenizer.encode(Pi05PromptEncoder(tokenizer).format_prompt("fold the towel", state), True)
    enc = Pi05PromptEncoder(tokenizer, max_len=10)
    assert len(full) > 10
    with caplog.at_level(logging.WARNING, logger="vlash.policies.processing.tokenizer"):
        ids, mask = enc.encode("fold the towel", state)
    assert "truncating" in caplog.text
    assert ids.tolist() == full[:10] and mask.all()


def test_pi05_state_dims_and_batch(tokenizer: PromptTokenizer) -> None:
    padded = np.zeros((2, 32), np.float32)
    padded[:, :3] = [[0.5, -0.5, 1.0], [-1.0, 0.0, 0.25]]
    enc = Pi05PromptEncoder(tokenizer, max_len=64, state_dims=3)
    assert "State: 192 64 255;" in enc.format_prompt("x", padded[0])
    ids, mask = enc.encode_batch(["fold the towel", "open the drawer"], torch.from_numpy(padded))
    assert ids.shape == mask.shape == (2, 64)
    for i, prompt in enumerate(["fold the towel", "open the drawer"]):
        one_ids, one_mask = enc.encode(prompt, padded[i])
        np.testing.assert_array_equal(ids[i], one_ids)
        np.testing.assert_array_equal(mask[i], one_mask)
    with pytest.raises(TokenizerError, match="2 prompts but 1 states"):
        enc.encode_batch(["a", "b"], padded[:1])
    with pytest.raises(TokenizerError, match="fewer than state_dims=3"):
        enc.format_prompt("x", padded[0, :2])


def test_pi05_encoder_validates_config(tokenizer: PromptTokenizer) -> None:
    with pytest.raises(TokenizerError, match="max_len must be >= 1, got 0"):
        Pi05PromptEncoder(tokenizer, max_len=0)
    with pytest.raises(TokenizerError, match="pad_id"):
        Pi05PromptEncoder(tokenizer, pad_id=-1)
    with pytest.raises(TokenizerError, match="state must be 1-D"):
        Pi05PromptEncoder(tokenizer).encode("x", np.zeros((2, 3)))
