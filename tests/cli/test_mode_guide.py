"""The execution-mode table (vlash/cli/mode_guide.py): every number is its evaluation's cell, METHODS.md and
`vlash run --help` show it, and `vlash run` warns once when the served policy was not trained for the mode."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from robot_io.executors import EXECUTION_MODES
from robot_io.protocol import TRAINED_WITH, CameraSpec, Metadata, decode, encode
from tests.fakes import LoopbackPolicyServer, hold_planner
from vlash.cli.main import main
from vlash.cli.mode_guide import (
    COLUMNS,
    DELAY,
    GUIDES,
    SYNC_AT_ZERO,
    help_table,
    markdown_table,
    mode_warning,
)

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "eval" / "report"


@cache
def success(evaluation: str, mode: str, delay: int) -> int:
    """The evaluation's success % of `mode` at `delay`, as the docs round it."""
    cells = json.loads(gzip.decompress((REPORT / f"{evaluation}.json.gz").read_bytes()))["cells"]
    (cell,) = [c for c in cells if c["mode"] == mode and c["delay"] == delay]
    return round(100 * cell["success_rate"])


def test_every_mode_has_one_row():
    assert [guide.mode for guide in GUIDES] == list(EXECUTION_MODES)


@pytest.mark.parametrize("guide", GUIDES, ids=lambda g: g.mode)
def test_every_number_is_its_evaluations_cell(guide):
    for evaluation, value in guide.success.items():
        if value is not None:
            assert value == success(evaluation, guide.mode, DELAY), (guide.mode, evaluation)
    if guide.untrained is not None:
        evaluation, value, naive = guide.untrained
        assert (value, naive) == (success(evaluation, guide.mode, DELAY), success(evaluation, "naive", DELAY))


def test_the_reference_is_sync_at_delay_zero():
    assert {evaluation: success(evaluation, "sync", 0) for evaluation in COLUMNS} == SYNC_AT_ZERO


def test_methods_carries_the_same_table():
    assert markdown_table() in (ROOT / "docs" / "METHODS.md").read_text()


def test_run_help_shows_the_table_under_mode_unwrapped_on_an_80_column_terminal():
    env = {**os.environ, "COLUMNS": "80"}
    out = subprocess.run([sys.executable, "-m", "vlash.cli.main", "run", "--help"], capture_output=True, text=True,
                         env=env, check=True).stdout  # fmt: skip
    for line in help_table().splitlines():
        if line.startswith("  "):  # the table's rows are kept as they are (a wrapped row would not be found)
            assert line.rstrip() in out, line


def test_a_mode_that_needs_training_warns_when_the_policy_lacks_it_or_does_not_say():
    lacks = mode_warning("prefix", ["future-state"], "hold-baseline")
    assert lacks and "committed prefixes" in lacks and "trained without them" in lacks and "30% at d = 4" in lacks
    unknown = mode_warning("faster", None, "lerobot/pi05_base")
    assert unknown and "committed prefixes and horizon-aware times" in unknown and "does not say" in unknown
    assert "horizon-aware times" in mode_warning("faster", ["future-state", "prefix"], "x")
    assert mode_warning("faster", list(TRAINED_WITH), "x") is None
    assert all(mode_warning(mode, None, "x") is None for mode in ("sync", "naive", "vlash", "rtc", "ensemble"))


def _metadata(trained: list[str] | None) -> Metadata:
    return Metadata("hold-baseline", [CameraSpec("base_0_rgb", 96, 96)], 6, 6, 20, 30.0, "fp32", "loopback", 1,
                    "constant", False, trained_with=trained)  # fmt: skip


def test_trained_with_travels_in_metadata_and_an_unknown_entry_is_refused():
    (back,) = [decode(encode(_metadata(["prefix"])))]
    assert back.trained_with == ["prefix"] and decode(encode(_metadata(None))).trained_with is None
    with pytest.raises(Exception, match="trained_with"):
        decode(encode(_metadata(["telepathy"])))


@pytest.mark.parametrize(("mode", "trained", "warned"), [
    ("prefix", [], True), ("prefix", ["future-state", "prefix"], False), ("vlash", [], False),
])  # fmt: skip
def test_vlash_run_warns_once_before_connecting_the_robot(capsys, mode, trained, warned):
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), _metadata(trained)) as server:
        argv = ["run", "--server", server.endpoint, "--robot", "mock", "--mode", mode, "--duration-s", "0.3",
                "--timeout", "5"]  # fmt: skip
        assert main(argv) == 0
    err = capsys.readouterr().err
    assert len(re.findall("warning: --mode", err)) == (1 if warned else 0), err
