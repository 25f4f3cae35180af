"""`vlash run` against a server that is still starting: it waits (--server-wait-s) with a plain progress line on
stderr, the robot untouched until the server answers; with no server it gives up in one line that says what to check
and which flag sets the wait; Ctrl-C during the wait stops cleanly. The host's load is printed beside the summary's
timings. No assertion that anything was fast."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

import vlash.cli.run_cmd as run_cmd
from robot_io.host_load import HostLoad
from robot_io.run_summary import RunSummary
from tests.robot_io.lerobot_fixture import ROOT, SO101_YAML, fake_lerobot_on_path
from tests.robot_io.test_client import FakeServer
from tests.robot_io.test_server_wait import answers_after
from vlash.cli.main import main

SO101_MAP = ["--camera", "base_0_rgb=front", "--camera", "left_wrist_0_rgb=wrist", "--camera", "right_wrist_0_rgb=none"]


def test_no_server_is_given_up_on_in_one_line_naming_the_flag_and_the_robot_is_sent_nothing(tmp_path, capsys):
    endpoint = f"ipc://{tmp_path}/nobody.sock"
    with fake_lerobot_on_path():
        from lerobot.robots.so_follower import INSTANCES

        built = len(INSTANCES)
        rc = main(["run", "--server", endpoint, "--robot", "lerobot:so101_follower", "--robot-config", str(SO101_YAML),
                   *SO101_MAP, "--timeout", "0.1", "--server-wait-s", "0.5"])  # fmt: skip
        arms = INSTANCES[built:]
    err = capsys.readouterr().err
    assert rc == 2 and err == (
        f"vlash run: error: no reply from {endpoint}: is `vlash serve` running there? (waited 0.5 s; --server-wait-s "
        "sets the wait)\n"
    )
    assert arms and all(arm.calibrated_on_connect is None and not arm.sent for arm in arms)  # never connected


def test_a_server_that_answers_late_is_waited_for_with_plain_progress_lines(tmp_path, capsys, monkeypatch):
    """The fake server ignores the first two HELLOs (re-sent every --timeout on a fresh socket): the run waits,
    prints where it waits, then drives the mock arm; the summary has the host's load beside its timings."""
    monkeypatch.setattr(run_cmd, "PROGRESS_EVERY_S", 0.05)
    server = FakeServer(f"ipc://{tmp_path}/starting.sock", answers_after(2))
    try:
        rc = main(["run", "--server", server.endpoint, "--robot", "mock", "--duration-s", "1", "--timeout", "0.3",
                   "--server-wait-s", "60"])  # fmt: skip
    finally:
        server.close()
    out, err = capsys.readouterr()
    assert rc == 0, err
    waits = [line for line in err.splitlines() if "waiting" in line]
    assert waits and "\r" not in err
    for line in waits:
        assert re.fullmatch(rf"vlash run: waiting for vlash serve at {re.escape(server.endpoint)}: \d+ s of 60 "
                            r"\(--server-wait-s\)", line), line  # fmt: skip
    assert re.search(r"^\s*chunks run\s+[1-9]", out, re.M), out
    assert re.search(r"^  host load (\d+\.\d\d|unknown) \(1-min average\) on \d+ cores; control-loop threads: 1$", out,
                     re.M), out  # fmt: skip


def test_the_summary_warns_when_the_host_load_inflates_its_timings():
    fields = {name: 0 for name in RunSummary.__dataclass_fields__}
    summary = RunSummary(**{**fields, "mode": "vlash", "rate_hz": 30.0, "duration_s": 1.0, "ttfa_p50_ms": None})
    busy = run_cmd.summary_text(summary, HostLoad(3.5, 2, 1, run_cmd.CONTROL_THREADS)).splitlines()
    quiet = run_cmd.summary_text(summary, HostLoad(0.5, 2, 1, run_cmd.CONTROL_THREADS)).splitlines()
    assert "  host load 3.50 (1-min average) on 2 cores; control-loop threads: 1" in busy
    assert [line for line in busy if "warning" in line] == [
        "  warning: the host's load average 3.50 exceeds the cores left beside this work (2 cores - 1 control-loop "
        "threads): other work shares the cores, so these timings will be inflated; compare them only with timings "
        "taken under the same load"
    ]
    assert "  host load 0.50 (1-min average) on 2 cores; control-loop threads: 1" in quiet
    assert not [line for line in quiet if "warning" in line] and len(quiet) == len(busy) - 1


def test_ctrl_c_while_waiting_for_the_server_stops_cleanly_with_rc_130(tmp_path):
    """A real `vlash run` process, SIGINT after its first progress line (printed after 5 s of waiting)."""
    argv = [sys.executable, "-m", "vlash.cli.main", "run", "--server", f"ipc://{tmp_path}/nobody.sock", "--robot",
            "mock", "--timeout", "1"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        first = proc.stderr.readline()  # blocks until the first progress line (or the process ends)
        assert first.startswith(f"vlash run: waiting for vlash serve at ipc://{tmp_path}/nobody.sock: "), first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10.0)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.splitlines()[-1] == (
        "vlash run: stopped by SIGINT (Ctrl-C) while waiting for the server; the robot was not connected and was sent "
        "nothing"
    ), err
    assert out == ""


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--robot", "mok"], "unknown robot spec 'mok'; --robot takes 'sim:<task>[:<seed>]' (task: reach, track, "
         "whack, intercept, hold), 'lerobot:<type>' (with --robot-config FILE.yaml) or 'mock'"),
        (["--robot", "sim:reech"], "--robot 'sim:reech': unknown simulated task 'reech'; choose one of reach, track, "
         "whack, intercept, hold"),
        (["--server-wait-s", "0"], "--server-wait-s must be > 0, got 0.0"),
    ],
)  # fmt: skip
def test_a_bad_robot_or_wait_is_refused_in_one_line_naming_every_choice_before_connecting(tmp_path, capsys, argv,
                                                                                           match):  # fmt: skip
    start = time.monotonic()
    assert main(["run", "--server", f"ipc://{tmp_path}/nobody.sock", *argv]) == 2
    assert time.monotonic() - start < 60.0  # refused, not waited out (the wait is 120 s)
    err = capsys.readouterr().err
    assert err == f"vlash run: error: {match}\n", err
