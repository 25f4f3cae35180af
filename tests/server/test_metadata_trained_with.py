"""What a checkpoint says it was trained with reaches METADATA's trained_with (vlash.runtime.metadata); `vlash run`
warns from it (tests/cli/test_mode_guide.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vlash.runtime.metadata import trained_with

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("checkpoint", "expected"), [
    ("pi05-tiny-sim-hold-observable", ["future-state", "prefix", "horizon-aware"]),
    ("pi05-tiny-sim-hold-observable-baseline", []),
])  # fmt: skip
def test_the_server_reads_what_a_checkpoint_was_trained_with_from_its_metadata(checkpoint, expected):
    metadata = yaml.safe_load((ROOT / "checkpoints" / checkpoint / "config.yaml").read_text())["metadata"]
    assert trained_with(metadata) == expected
    assert trained_with({"trained_by": "lerobot"}) is None
    no_share = {"augment": {"future_state": True, "prefix_mix": True, "mix_prob": 0.0, "has_prob": 0.5}}
    assert trained_with(no_share) == ["future-state"]
