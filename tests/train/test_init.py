"""State-bin embeddings start from a smooth code of the bin value; other rows stay random."""

from __future__ import annotations

import torch

from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random
from vlash.policies.processing.word_tokenizer import train_tokenizer
from vlash.train.init import init_state_bin_embeddings, tokenizer_vocab


def test_bin_rows_are_smooth_in_the_value(tmp_path):
    vocab = tokenizer_vocab(train_tokenizer(["reach the red dot"], tmp_path))
    model = build_random(load_preset("pi05-tiny"), seed=0)
    before = model.vlm.embed_tokens.weight.detach().clone()
    assert init_state_bin_embeddings(model, vocab) == 257  # bins -1..255
    weight = model.vlm.embed_tokens.weight.detach()
    rows = weight[[vocab[str(b)] for b in range(256)]]
    dist = torch.cdist(rows, rows)
    assert (dist[0, 1:] > 0).all() and dist[100, 101] < dist[100, 110] < dist[100, 200]
    assert abs(rows.std().item() - before.std().item()) < 0.1  # the random rows' scale
    untouched = [vocab[w] for w in ("reach", "Task", "<bos>")]
    assert torch.equal(weight[untouched], before[untouched])


def test_scratch_init_scales_embeddings_and_gives_patches_a_grid_code():
    from vlash.policies.pi05.config import load_preset
    from vlash.train.init import grid_code, init_from_scratch

    model = build_random(load_preset("pi05-tiny"), seed=0)
    init_from_scratch(model)
    embed = model.vlm.embed_tokens.weight
    assert abs(embed.std().item() * embed.shape[1] ** 0.5 - 1.0) < 0.05  # unit scale after Gemma's sqrt(width)
    pos = model.vision.embeddings.position_embedding.weight
    code = grid_code(8, pos.shape[1])
    torch.testing.assert_close(pos, code.float())
    # neighbouring patches are closer than distant ones, along rows and columns
    dist = torch.cdist(code, code)
    assert dist[0, 1] < dist[0, 7] and dist[0, 8] < dist[0, 56] and dist[9, 10] < dist[9, 15]
