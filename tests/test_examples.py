"""The examples in examples/ run as documented."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.robot_io.lerobot_fixture import FAKE_LEROBOT
from tests.serve_process import ServeProcess
from vlash.cli.cpu_threads import server_threads

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
    chunk = next(i for i, line in enumerate(lines) if line.startswith("chunk (1, 50, 32) in 10 steps"))
    # the host's load beside the timings, torch on all cores but one (vlash serve's rule); a warning when loaded
    assert re.fullmatch(r"host load (\d+\.\d\d|unknown) \(1-min average\) on \d+ cores; torch threads: \d+",
                        lines[chunk + 1]), lines  # fmt: skip
    assert lines[chunk + 1].endswith(f"torch threads: {server_threads()}")
    assert all(line.startswith("warning: the host's load average") for line in lines[chunk + 2 :]), lines


def docstring_commands(name: str) -> list[list[str]]:
    """The `vlash serve` / `python examples/...` lines of an example's docstring, continuation lines joined."""
    doc = (ROOT / "examples" / f"{name}.py").read_text().split('"""')[1].replace("\\\\\n", " ")
    lines = [line.strip() for line in doc.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith(("vlash serve", "python examples/"))]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["custom_robot", "lerobot_arm"])
def test_the_robot_examples_run_as_their_docstrings_say(name):
    """The server line as written (on a free loopback port), then each robot line against it for 2 s (the LeRobot
    arm through the fake LeRobot package: no hardware here)."""
    commands = docstring_commands(name)
    assert commands[0][:2] == ["vlash", "serve"] and len(commands) >= 2, commands
    server = ServeProcess(commands[0][2:])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_LEROBOT), str(ROOT)])}
    try:
        for argv in commands[1:]:
            argv = [sys.executable, *argv[1:], "--duration-s", "2"]
            argv[argv.index("--server") + 1] = server.endpoint
            done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
            assert re.search(r"chunks run: [1-9]", done.stdout), done.stdout
            if name == "custom_robot":  # random weights: nearly every action clamped, said once by the safety filter
                assert done.stderr.count("safety clamped ") == 1, done.stderr
    finally:
        assert server.stop() == 0, server.err
