"""The examples in examples/ run as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_stream_actions_example_streams_first_action_after_one_step():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "stream_actions.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("step 0: actions [0, 1)")
    assert lines[-1].startswith("chunk (1, 50, 32) in 10 steps")
