"""The trained word-level tokenizer covers every prompt the pi0.5 encoder writes for the tasks."""

from __future__ import annotations

import numpy as np
import pytest

from vlash.policies.pi05 import load_preset
from vlash.policies.processing.tokenizer import Pi05PromptEncoder, PromptTokenizer, TokenizerError
from vlash.policies.processing.word_tokenizer import SPECIALS, train_tokenizer

UNK = SPECIALS.index("<unk>")


def _instructions() -> list[str]:
    try:  # every phrasing of the simulated tasks when the suite is installed
        from vlash.sim.tasks import TASK_TYPES
        from vlash.sim.tasks.base import COLORS
    except ImportError:
        return ["reach the red dot", "follow_the moving target!", "tap each target before it disappears."]
    return [t.format(color=c) for task in TASK_TYPES.values() for t in task.templates for c in COLORS]


def test_every_prompt_and_state_tokenizes_to_known_tokens(tmp_path):
    instructions = _instructions()
    file = train_tokenizer(instructions, tmp_path)
    config = load_preset("pi05-tiny")
    tokenizer = PromptTokenizer.from_dir(tmp_path)
    assert file.name == "tokenizer.json" and tokenizer.bos_id == 2 and tokenizer.vocab_size <= config.vocab_size
    encoder = Pi05PromptEncoder(tokenizer, max_len=config.max_token_len, state_dims=2)
    rng = np.random.default_rng(0)
    # normalized states: the whole bin range, values below -1 (bin -1), above 1 (bin 255), exact edges
    states = [*rng.uniform(-1.5, 1.5, size=(200, 2)), np.array([-1.0, 1.0]), np.array([-3.0, 0.99999])]
    for i, state in enumerate(states):
        text = instructions[i % len(instructions)]
        ids = tokenizer.encode(encoder.format_prompt(text, state), add_bos=True)
        assert ids[0] == tokenizer.bos_id and UNK not in ids, encoder.format_prompt(text, state)
        assert len(ids) <= config.max_token_len and max(ids) < config.vocab_size
    bins = [str(b) for b in range(-1, 256)]
    assert UNK not in tokenizer.encode(" ".join(bins), add_bos=False)
    assert len(tokenizer.encode(" ".join(bins), add_bos=False)) == len(bins)  # one token per bin


def test_ids_do_not_depend_on_instruction_order(tmp_path):
    a = train_tokenizer(["b c", "a"], tmp_path / "a").read_text()
    b = train_tokenizer(["a", "b c", "a"], tmp_path / "b").read_text()
    assert a == b


def test_too_many_words_is_an_error(tmp_path):
    words = [f"w{i}" for i in range(1000)]
    with pytest.raises(TokenizerError, match="vocabulary"):
        train_tokenizer([" ".join(words)], tmp_path, max_vocab=1024)
