"""Fixtures shared by the policy-directory and task-space tests."""

from __future__ import annotations

import pytest

from tests.policies.builders import train_wordlevel_tokenizer
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A WordLevel tokenizer.json trained on the builders' corpus."""
    return train_wordlevel_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def tiny():
    """A random pi05-tiny (seed 5); test modules may define their own `tiny`."""
    return build_random(load_preset("pi05-tiny"), seed=5)
