from __future__ import annotations

from pathlib import Path

import pytest

from tests.torch_threads import torch_threads

MICRO = Path(__file__).resolve().parents[1] / "train" / "pi05-micro.yaml"


@pytest.fixture(autouse=True)
def _two_threads():
    with torch_threads(2):
        yield


@pytest.fixture(scope="session")
def micro_policy_dir(tmp_path_factory) -> Path:
    """An fp32 vlash policy directory of the ~0.1M-parameter micro shape, random weights."""
    from vlash.policies.formats.random_policy import write_random_policy

    return write_random_policy(tmp_path_factory.mktemp("micro") / "fp32", str(MICRO))


@pytest.fixture(scope="session")
def tiny_policy_dir(tmp_path_factory) -> Path:
    from vlash.policies.formats.random_policy import write_random_policy

    return write_random_policy(tmp_path_factory.mktemp("tiny") / "fp32", "pi05-tiny")
