"""tools/bench_contention.py: the summary math, the schedule, the burner's cleanup, argument checks and a pi05-tiny run
with two settings. Nothing here depends on how fast the machine is or how much the burner slows it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tools.tool_loader import ROOT, load_tool

tool = load_tool("bench_contention")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_summary_percentiles_and_ratios_on_given_numbers():
    # numpy's linear percentile: p99 of [10, 10, 10, 10, 20] sits at index 3.96, 10 + 0.96 * 10
    samples = {"a": {"quiet": [10, 10, 10, 10, 20], "busy": [30, 30, 30, 30, 40]}, "b": {"quiet": [5], "busy": [9]}}
    a, b = tool.summarize(samples)
    assert a["setting"] == "a" and (a["quiet_n"], a["busy_n"]) == (5, 5)
    assert (a["quiet_p50_ms"], a["busy_p50_ms"]) == (10.0, 30.0)
    assert a["quiet_p99_ms"] == pytest.approx(19.6) and a["busy_p99_ms"] == pytest.approx(39.6)
    assert a["p99_ratio"] == pytest.approx(39.6 / 19.6) and a["p50_ratio"] == pytest.approx(3.0)
    assert a["within_target"] is False  # 2.02x
    assert (b["quiet_p99_ms"], b["busy_p99_ms"], b["p99_ratio"], b["within_target"]) == (5.0, 9.0, 1.8, True)
    table = tool.markdown([a, b], {"a": "torch 1 threads", "b": "x"}).splitlines()
    assert table[2] == "| a | torch 1 threads | 10.0 | 19.6 | 30.0 | 39.6 | 2.02x | 3.00x | no |"
    assert table[3] == "| b | x | 5.0 | 5.0 | 9.0 | 9.0 | 1.80x | 1.80x | yes |"


def test_schedule_rotates_settings_and_alternates_which_phase_is_first():
    got = list(tool.schedule(["a", "b", "c"], 3))
    assert [(r, n) for r, n, _ in got] == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a")] + [
        (2, "c"),
        (2, "a"),
        (2, "b"),
    ]
    assert [p for r, _, p in got if r in (0, 2)] == [("quiet", "busy")] * 6
    assert [p for r, _, p in got if r == 1] == [("busy", "quiet")] * 3


def test_the_burner_is_stopped_and_reaped_even_when_the_body_raises():
    with tool.burner(settle_s=0) as proc:
        assert proc.poll() is None and not _gone(proc.pid)
    assert proc.returncode is not None and _gone(proc.pid)
    with pytest.raises(RuntimeError, match="boom"), tool.burner(settle_s=0) as proc:
        raise RuntimeError("boom")
    assert proc.returncode is not None and _gone(proc.pid)
    assert not tool._LIVE_BURNERS


def _proc_stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), or None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None


def _stopped(pid: int) -> bool:
    """Gone, or a zombie (killed, waiting for a reaper that is not this process)."""
    stat = _proc_stat(pid)
    return stat is None or stat[0] == "Z"


def _cpu_ticks(pid: int) -> int:
    stat = _proc_stat(pid)
    return 0 if stat is None else int(stat[11]) + int(stat[12])  # utime + stime (fields 14 and 15 of the file)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_burner_dies_with_its_parent_however_the_parent_dies():
    burn = tool.DIE_WITH_PARENT + tool.BURN
    spawn = "import os, subprocess, sys, time\n"
    spawn += f"p = subprocess.Popen([sys.executable, '-c', {burn!r}, str(os.getpid())])\n"
    spawn += "print(p.pid, flush=True)\ntime.sleep(60)"
    parent = subprocess.Popen([sys.executable, "-c", spawn], stdout=subprocess.PIPE, text=True)
    burner_pid = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 30  # spinning for 0.2 s of CPU: past its start-up, in the loop
        while _cpu_ticks(burner_pid) < 0.2 * os.sysconf("SC_CLK_TCK") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _stopped(burner_pid)
        parent.kill()  # SIGKILL: no atexit, no finally
        parent.wait()
        deadline = time.monotonic() + 30
        while not _stopped(burner_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _stopped(burner_pid)
    finally:  # a burner that outlived its parent is not left spinning
        with contextlib.suppress(ProcessLookupError):
            os.kill(burner_pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_burner_whose_parent_died_before_it_asked_exits_at_once():
    # the parent it is told of (pid 1) is not its parent: as if its own had died before the request took effect
    run = subprocess.run([sys.executable, "-c", tool.DIE_WITH_PARENT + tool.BURN, "1"], timeout=60)
    assert run.returncode == 0


def test_a_worker_that_dies_while_building_is_reported_and_reaped(capfd):
    # the status in the message comes from wait(): the process is reaped
    with pytest.raises(tool.WorkerFailed, match=r"worker broken exited \(status 1\)"):
        tool.Worker("broken", {"policy": "pi05-tiny"}, dict(os.environ))  # no "steps": KeyError in the worker
    assert "KeyError: 'steps'" in capfd.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds", "0"], "--rounds: "),
        (["--chunks", "0"], "--chunks: "),
        (["--warmup", "-1"], "--warmup: "),
        (["--settings", "torch-default", "torch-default"], "--settings names one twice"),
        (["--settings", "tensorrt"], "invalid choice: 'tensorrt'"),
        (["--policy", "no-such-policy"], "--policy no-such-policy: "),
    ],
)
def test_bad_arguments_are_refused(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        tool.parse_args(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_issue_config_and_default_settings(tmp_path, capsys):
    args = tool.parse_args(["--policy", "pi05-small", "--cameras", "1", "--prompt-len", "64"])
    assert (args.config.name, args.config.num_cameras, args.config.max_token_len) == ("pi05-small", 1, 64)
    assert args.settings == list(tool.SETTINGS) and (args.rounds, args.chunks, args.steps) == (4, 5, 10)
    with pytest.raises(SystemExit):
        tool.parse_args(["--json", str(tmp_path)])
    assert f"--json {tmp_path} is a directory" in capsys.readouterr().err


@pytest.mark.slow
def test_tiny_run_times_both_settings_and_leaves_no_burner(tmp_path):
    out = tmp_path / "contention.json"
    settings = ["torch-default", "ort-nospin"]
    command = [sys.executable, "tools/bench_contention.py", "--policy", "pi05-tiny", "--rounds", "1", "--chunks", "2"]
    command += ["--warmup", "1", "--settings", *settings, "--json", str(out)]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("<!-- ") and "pi05-tiny" in lines[0] and "1 rounds x 2 chunks" in lines[0]
    rows = [line.split(" | ") for line in lines[3:]]
    assert [r[0] for r in rows] == ["| torch-default", "| ort-nospin"] and len(lines) == 5
    assert all(r[-1] in ("yes |", "no |") for r in rows)
    assert "round 1/1 ort-nospin busy" in run.stderr
    doc = json.loads(out.read_text())
    assert [r["setting"] for r in doc["rows"]] == settings
    for name in settings:
        assert all(len(doc["samples_ms"][name][p]) == 2 for p in ("quiet", "busy"))
        assert all(x > 0 for p in ("quiet", "busy") for x in doc["samples_ms"][name][p])
    ort = doc["workers"]["ort-nospin"]
    assert ort["engine"]["engine"] == "onnxruntime" and ort["spec"]["spinning"] is False
    assert ort["engine"]["threads"] == ort["spec"]["threads"] == max(1, doc["host"]["available_cores"] - 1)
    assert len(doc["burner_pids"]) == 2 and all(_gone(pid) for pid in doc["burner_pids"])
